"""``herdsim run``, ``validate``, ``scenarios`` and ``strategies``: one scenario at a time."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from herdsim.cli.app import (
    OutOpt,
    PrometheusOpt,
    ScenarioArg,
    SetOpt,
    app,
    console,
    load,
    output_dir,
)
from herdsim.cli.outputs import report_export
from herdsim.cli.tables import summary_table
from herdsim.config import bundled
from herdsim.errors import OutputExistsError
from herdsim.outputs import openmetrics
from herdsim.outputs.compare_dir import save_run
from herdsim.policies import strategies
from herdsim.results.result import run as run_once


@app.command()
def run(scenario: ScenarioArg, set_: SetOpt = None, out: OutOpt = None,
        prometheus: PrometheusOpt = False) -> None:
    """Run one scenario, print its summary, and write its outputs to --out."""
    sc = load(scenario, set_)
    target = output_dir(out, sc.name)
    with console.status(f"simulating {sc.name} ({sc.duration:g} s of traffic)…") as status:
        started = time.monotonic()

        def progress(now: float, duration: float) -> None:
            left = (time.monotonic() - started) * (duration - now) / now if now else 0.0
            status.update(f"simulating {sc.name}: {now:,.0f} of {duration:,g} s simulated, "
                          f"about {left:,.0f} s left")

        result = run_once(sc, progress=progress)
    with console.status("writing outputs and timeline.png…"):
        save_run(result, target)
    console.print(summary_table(result.summary, f"{sc.name} — {sc.retry.strategy}"))
    console.print(f"outputs: [bold]{target}[/]", soft_wrap=True)
    if prometheus:
        report_export(openmetrics.export(target))


@app.command()
def validate(scenario: ScenarioArg, set_: SetOpt = None) -> None:
    """Check a scenario file and print it fully resolved (defaults filled in)."""
    sc = load(scenario, set_)
    console.print(f"[green]ok[/]: {scenario} is a valid scenario")
    console.print(sc.to_yaml(), highlight=False, markup=False, soft_wrap=True)


@app.command("strategies")
def list_strategies() -> None:
    """List the built-in and installed backoff strategies with their formulas."""
    table = Table(show_header=True, header_style="bold")
    table.add_column("strategy")
    table.add_column("sleep before retry number attempt+1 (attempt 0 = first retry)")
    for name, formula in strategies.available().items():
        table.add_row(name, formula)
    console.print(table)
    console.print("A strategy of your own: retry.strategy: package.module:ClassName, or an "
                  "entry point in the 'herdsim.strategies' group.")




@app.command("scenarios")
def list_scenarios(
    copy_to: Annotated[Path | None, typer.Option(
        "--copy-to", help="Copy every bundled scenario into this folder, for editing.",
        show_default=False)] = None,
) -> None:
    """List the bundled scenarios (run one by name: herdsim run outage)."""
    if copy_to is not None:
        copy_to.mkdir(parents=True, exist_ok=True)
        taken = [name for name in bundled.names() if (copy_to / f"{name}.yaml").exists()]
        if taken:
            raise OutputExistsError(f"{copy_to}: already holds {', '.join(taken)}.yaml; "
                                    "choose another folder")
        for name in bundled.names():
            shutil.copyfile(bundled.directory() / f"{name}.yaml", copy_to / f"{name}.yaml")
        console.print(f"copied {len(bundled.names())} scenarios to [bold]{copy_to}[/]")
        return
    table = Table(show_header=True, header_style="bold")
    table.add_column("scenario")
    table.add_column("what it shows")
    for name in bundled.names():
        table.add_row(name, bundled.describe(name))
    console.print(table)
    console.print(f"files: {bundled.directory()}", highlight=False, soft_wrap=True)

"""``herdsim run``, ``validate``, ``scenarios`` and ``strategies``: one scenario at a time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from herdsim.cli import complete
from herdsim.cli.app import (
    FORMAT,
    ExplainOpt,
    FailIfOpt,
    ForceOpt,
    FormatOpt,
    JsonOpt,
    OutOpt,
    PrometheusOpt,
    QuietOpt,
    ScenarioArg,
    SetOpt,
    app,
    console,
    emit_json,
    err_console,
    gate,
    load,
    output_dir,
    parse_formats,
    safe,
)
from herdsim.cli.class_table import class_table
from herdsim.cli.outputs import metrics_beside
from herdsim.cli.progress import SimProgress
from herdsim.cli.replica_table import replica_tables
from herdsim.cli.timings import TimingsOpt
from herdsim.config import bundled
from herdsim.errors import OutputExistsError
from herdsim.system import heap
from herdsim.system import timings as clock


@app.command()
def run(scenario: ScenarioArg, set_: SetOpt = None, out: OutOpt = None,
        prometheus: PrometheusOpt = False, json_: JsonOpt = False, quiet: QuietOpt = False,
        fail_if: FailIfOpt = None, fmt: FormatOpt = FORMAT, force: ForceOpt = False,
        explain: ExplainOpt = False, timings: TimingsOpt = False) -> None:
    """Run one scenario, print its summary, and write its outputs to --out.

    Exit code 0, 2 for bad input, 3 when a --fail-if condition holds."""
    with heap.importing():
        from herdsim.cli import gate as gate_rules
        from herdsim.cli.tables import definitions, shown_keys, summary_table, tier_table
        from herdsim.cli.timings import report
        from herdsim.outputs.compare_dir import save_run
        from herdsim.results.result import run as run_once

    if timings:
        clock.start()
    with clock.phase("load and check the scenario"):
        conditions = gate_rules.parse(fail_if)
        formats = parse_formats(fmt)
        sc = load(scenario, set_)
        target = output_dir(out, sc.name)
    with clock.phase("estimate the run"):
        _plan(sc, force, say=not (quiet or json_))
    with SimProgress(f"simulating {safe(sc.name)}", enabled=not (quiet or json_)) as progress:
        result = run_once(sc, progress=progress, force=force)
    save_run(result, target, formats)
    with clock.phase("print the summary"):
        if json_:
            emit_json(result.summary)
        elif not quiet:
            console.print(summary_table(result.summary, f"{sc.name} — {sc.retry.strategy}"))
            tiers = tier_table(result.summary, console.width)
            if tiers is not None:
                console.print(tiers)
            for table in replica_tables(result.summary):
                console.print(table)
            classes = class_table(result.summary)
            if classes is not None:
                console.print(classes)
            if explain:
                console.print(definitions(shown_keys(result.summary), result.summary))
        if not quiet:
            (err_console if json_ else console).print(f"outputs: [bold]{safe(target)}[/]",
                                                      soft_wrap=True)
    if prometheus:
        metrics_beside(target, say=not (quiet or json_))
    if timings:
        report()
    gate(gate_rules.failing(conditions, {sc.name: result.summary}))


def _plan(sc, force: bool, say: bool) -> None:
    """Before anything starts, the run held to the budget (unless *force*); before a long
    run, when *say*, its estimate on stderr: jobs, calls, memory and wall time."""
    from herdsim.planning import estimate

    estimate.check([sc], force=force)
    if not say:
        return
    guess = estimate.estimate(sc)
    took = estimate.timing([guess])
    if took is not None:
        err_console.print(f"{safe(sc.name)}: {guess.describe()}; time: {took.describe()}",
                          highlight=False, soft_wrap=True)


@app.command()
def validate(scenario: ScenarioArg, set_: SetOpt = None, import_strategy: Annotated[
        bool, typer.Option("--import-strategy", help="Import a retry.strategy given as "
                           "module:Class to check it too (this runs its code).")] = False,
             ) -> None:
    """Check a scenario file and print it fully resolved (defaults filled in)."""
    from herdsim.policies.backoff import registry

    sc = load(scenario, set_, trust_code=import_strategy)
    console.print(f"[green]ok[/]: {safe(scenario)} is a valid scenario")
    if not registry.is_own(sc.retry.strategy) and not import_strategy:
        console.print(f"note: retry.strategy {safe(sc.retry.strategy)} is code and was not "
                      "imported; --import-strategy imports and checks it")
    console.print(sc.to_yaml(), highlight=False, markup=False, soft_wrap=True)


@app.command("strategies")
def list_strategies() -> None:
    """List the built-in and installed backoff strategies with their formulas."""
    from herdsim.policies.backoff import registry

    table = Table(show_header=True, header_style="bold")
    table.add_column("strategy")
    table.add_column("sleep before retry number attempt+1 (attempt 0 = first retry)")
    for name, formula in registry.available().items():
        table.add_row(name, formula)
    console.print(table)
    console.print("A strategy of your own: retry.strategy: package.module:ClassName, or an "
                  "entry point in the 'herdsim.strategies' group.")




@app.command("kpis")
def list_kpis(keys: Annotated[list[str] | None, typer.Argument(
        help="KPI keys to define (default: every one).", metavar="KPI",
        autocompletion=complete.kpis,
        show_default=False)] = None) -> None:
    """Define the KPIs of summary.json and the tables (the registry: label, unit, better
    direction, meaning)."""
    from herdsim.analysis.kpis import BY_KEY
    from herdsim.cli.gate import unknown
    from herdsim.cli.tables import definitions
    from herdsim.errors import UsageError

    wrong = [key for key in keys or [] if key not in BY_KEY]
    if wrong:
        raise UsageError(unknown(wrong[0]))
    console.print(definitions(list(keys or BY_KEY)))


@app.command("scenarios")
def list_scenarios(
    copy_to: Annotated[Path | None, typer.Option(
        "--copy-to", metavar="DIR",
        help="Copy every bundled scenario into this folder, for editing.",
        show_default=False)] = None,
) -> None:
    """List the bundled scenarios (run one by name: herdsim run outage)."""
    if copy_to is not None:
        from herdsim.outputs.atomic import write_file

        copy_to.mkdir(parents=True, exist_ok=True)
        files = [f"{name}.yaml" for name in bundled.names()] + [bundled.SCHEMA]
        taken = [name for name in files
                 if os.path.lexists(copy_to / name)]  # a link, even dangling
        if taken:
            raise OutputExistsError(f"{copy_to}: already holds {', '.join(taken)}; "
                                    "choose another folder")
        for name in files:  # the schema too: the scenarios' modeline points to it
            write_file(copy_to / name,
                       (bundled.directory() / name).read_text(encoding="utf-8"))
        console.print(f"copied {len(bundled.names())} scenarios and their JSON Schema "
                      f"({bundled.SCHEMA}) to [bold]{safe(copy_to)}[/]")
        return
    table = Table(show_header=True, header_style="bold")
    table.add_column("scenario")
    table.add_column("what it shows")
    for name in bundled.names():
        table.add_row(name, bundled.describe(name))
    console.print(table)
    console.print(f"files: {bundled.directory()}", highlight=False, soft_wrap=True)

"""``herdsim compare``: arms of one scenario side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from herdsim.cli.app import (
    FormatOpt,
    OutOpt,
    PrometheusOpt,
    ScenarioArg,
    SetOpt,
    StrategiesOpt,
    VaryOpt,
    app,
    console,
    load,
    output_dir,
    parse_formats,
    parse_list,
    parse_vary,
)
from herdsim.cli.outputs import report_export
from herdsim.cli.tables import ranked_table
from herdsim.errors import UsageError
from herdsim.experiments.compare import compare as compare_arms
from herdsim.outputs import openmetrics
from herdsim.outputs.compare_dir import save_comparison


@app.command()
def compare(
    scenario: ScenarioArg, set_: SetOpt = None, strategies_: StrategiesOpt = None,
    presets_: Annotated[str | None, typer.Option(
        "--presets", help="Comma-separated library presets to compare instead of strategies "
                          "(herdsim presets); each replaces the fields it sets.",
        show_default=False)] = None,
    vary: VaryOpt = None,
    replications: Annotated[int, typer.Option(
        "--replications", min=1, help="Runs per arm, seeds seed..seed+N-1 shared by all arms.")
    ] = 1,
    out: OutOpt = None, fmt: FormatOpt = "png,svg",
    report: Annotated[bool, typer.Option("--report", help="Also write report.html.")] = False,
    processes: Annotated[int | None, typer.Option(
        "--processes", min=1, help="Parallel processes (default: all cores).",
        show_default=False)] = None,
    prometheus: PrometheusOpt = False,
) -> None:
    """Run a scenario under several strategies or presets (and settings) with common random
    numbers."""
    sc = load(scenario, set_)
    names = parse_list("--strategies", strategies_)
    preset_names = parse_list("--presets", presets_)
    if names and preset_names:
        raise UsageError("--strategies and --presets: give one of them")
    formats = parse_formats(fmt)
    target = output_dir(out, f"{sc.name}-compare")
    comparison = compare_arms(sc, names, parse_vary(vary), replications, processes,
                              presets=preset_names)
    with console.status("writing outputs and figures…"):
        save_comparison(comparison, target, formats, report=report)
    console.print(ranked_table(comparison))
    console.print(f"outputs: [bold]{target}[/]", soft_wrap=True)
    if prometheus:
        report_export(openmetrics.export(target))



"""``herdsim compare``: arms of one scenario side by side."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herdsim.cli import complete
from herdsim.cli.app import (
    FORMAT,
    ExplainOpt,
    FailIfOpt,
    ForceOpt,
    FormatOpt,
    JsonOpt,
    OutOpt,
    ProcessesOpt,
    PrometheusOpt,
    QuietOpt,
    ScenarioArg,
    SetOpt,
    StrategiesOpt,
    VaryOpt,
    app,
    console,
    emit_json,
    err_console,
    error_lines,
    gate,
    load,
    output_dir,
    parse_formats,
    parse_list,
    parse_vary,
    safe,
)
from herdsim.cli.outputs import metrics_beside
from herdsim.cli.timings import TimingsOpt
from herdsim.errors import UsageError
from herdsim.system import heap
from herdsim.system import timings as clock

if TYPE_CHECKING:
    from herdsim.results.comparison import Comparison


@app.command()
def compare(
    scenario: ScenarioArg, set_: SetOpt = None, strategies_: StrategiesOpt = None,
    presets_: Annotated[str | None, typer.Option(
        "--presets", metavar="A,B,...", autocompletion=complete.presets,
        help="Comma-separated library presets to compare instead of strategies "
                          "(herdsim presets); each replaces the fields it sets.",
        show_default=False)] = None,
    vary: VaryOpt = None,
    replications: Annotated[int, typer.Option(
        "--replications", min=1, metavar="N",
        help="Runs per arm, seeds seed..seed+N-1 shared by all arms.")
    ] = 1,
    out: OutOpt = None, fmt: FormatOpt = FORMAT,
    report: Annotated[bool, typer.Option("--report", help="Also write report.html.")] = False,
    processes: ProcessesOpt = None,
    prometheus: PrometheusOpt = False, json_: JsonOpt = False, quiet: QuietOpt = False,
    fail_if: FailIfOpt = None, force: ForceOpt = False, explain: ExplainOpt = False,
    timings: TimingsOpt = False,
) -> None:
    """Run a scenario under several strategies or presets (and settings) with common random
    numbers.

    Exit code 0, 1 when an arm fails of a bug, 2 for bad input (an arm that fails of it
    too), 3 when a --fail-if condition holds for any arm. An arm that fails or Ctrl-C
    stops every arm; the arms finished before are saved."""
    with heap.importing():
        from herdsim.cli import gate as gate_rules
        from herdsim.cli.class_table import compare_class_table
        from herdsim.cli.tables import compare_keys, definitions, ranked_table
        from herdsim.cli.timings import report as report_timings
        from herdsim.experiments.compare import Failed, Interrupted
        from herdsim.experiments.compare import compare as compare_arms
        from herdsim.outputs.compare_dir import save_comparison

    if timings:
        clock.start()
    with clock.phase("load and check the scenario"):
        conditions = gate_rules.parse(fail_if)
        sc = load(scenario, set_)
        names = parse_list("--strategies", strategies_)
        preset_names = parse_list("--presets", presets_)
        if names and preset_names:
            raise UsageError("--strategies and --presets: give one of them")
        formats = parse_formats(fmt)
        target = output_dir(out, f"{sc.name}-compare")
    try:
        with clock.phase("arms: start, collect, combine"):
            comparison = compare_arms(
                sc, names or None, parse_vary(vary), replications, processes,  # type: ignore[arg-type]
                progress=not (quiet or json_), force=force, presets=preset_names or None)
    except Interrupted as stop:  # save the arms that finished, whole, marked as such
        save_comparison(stop.comparison, target, formats, report=report)
        err_console.print(f"interrupted: {safe(_saved(stop.comparison, target, 'not run'))}",
                          soft_wrap=True)
        raise typer.Exit(130) from None
    except Failed as failed:  # the same, and the one line naming the arm and the cause
        if failed.comparison is None:
            raise
        save_comparison(failed.comparison, target, formats, report=report)
        error_lines([f"{failed}; {_saved(failed.comparison, target, 'not finished')}"])
        raise typer.Exit(failed.exit_code) from None
    started = time.perf_counter()
    save_comparison(comparison, target, formats, report=report)
    saved = time.perf_counter() - started
    with clock.phase("print the table"):
        if json_:
            emit_json(comparison.to_json())
        elif not quiet:
            console.print(ranked_table(comparison, console.width))
            by_class = compare_class_table(comparison)
            if by_class is not None:  # a run with criticality classes
                console.print(by_class)
            if explain:
                console.print(definitions(compare_keys(comparison),
                                          {"peak_window": sc.peak_window}))
        if not quiet:
            (err_console if json_ else console).print(
                f"outputs: [bold]{safe(target)}[/] (tables and figures written in "
                f"{saved:.1f} s)", soft_wrap=True)
    if prometheus:
        metrics_beside(target, say=not (quiet or json_))
    if timings:
        report_timings()
    summaries = {row["arm"]: row for row in comparison.to_json()["arms"]}
    gate(gate_rules.failing(conditions, summaries))


def _saved(partial: Comparison, target: Path, left: str) -> str:
    """What a stopped comparison kept: its finished arms, saved in *target*, and the arms
    *left* (``not run``, ``not finished``)."""
    done = len(partial.arms)
    return (f"{done} finished arm{'s' * (done > 1)} saved in {target} as a complete "
            f"comparison of those arms ({len(partial.unfinished)} {left}: "
            f"{', '.join(map(repr, partial.unfinished))}; arms.json lists them)")

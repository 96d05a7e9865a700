"""``herdsim sweep``: a scenario over a grid of settings, resumable."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from herdsim.cli import complete
from herdsim.cli.app import (
    FailIfOpt,
    ForceOpt,
    JsonOpt,
    LocalProcessesOpt,
    QuietOpt,
    ScenarioArg,
    SchedulerOpt,
    SetOpt,
    app,
    console,
    emit_json,
    err_console,
    error_lines,
    gate,
    parse_list,
    parse_sets,
    safe,
)
from herdsim.config import bundled
from herdsim.errors import TaskError, UsageError

if TYPE_CHECKING:
    import pandas as pd


@app.command("sweep")
def sweep_command(
    scenario: ScenarioArg,
    grid: Annotated[list[str] | None, typer.Option(
        "--grid", metavar="PATH=VALUES",
        help="A swept field: path=v1,v2,... or path=start:stop:n[:log] "
                       "(repeatable; e.g. downstream.outages.0.duration=1s:20s:5:log).")] = None,
    strategies_: Annotated[str | None, typer.Option(
        "--strategies", metavar="A,B,...", autocompletion=complete.strategies,
        help="Comma-separated strategies (default: the scenario's).",
        show_default=False)] = None,
    presets_: Annotated[str | None, typer.Option(
        "--presets", metavar="A,B,...", autocompletion=complete.presets,
        help="Comma-separated library presets: the axis retry.preset "
             "(instead of --strategies; herdsim presets).",
        show_default=False)] = None,
    replications: Annotated[int, typer.Option(
        "--replications", metavar="N",
        help="Runs per cell and strategy (seeds seed, seed+1, ...).")] = 1,
    set_: SetOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="Output directory; the same command resumes it "
                                     "(default runs/<name>-sweep-<digest>).",
        show_default=False)] = None,
    scheduler: SchedulerOpt = None, processes: LocalProcessesOpt = None,
    draw_map: Annotated[bool, typer.Option(
        "--map", help="Draw the metastability map to DIR/map.png.")] = False,
    json_: JsonOpt = False, quiet: QuietOpt = False, fail_if: FailIfOpt = None,
    force: ForceOpt = False,
) -> None:
    """Run a scenario over a grid of settings x strategies x replications (resumable).

    Exit code 0, 1 when a task fails of a bug, 2 for bad input (a task that fails of it
    too), 3 when a --fail-if condition holds for any run. A task that fails stops the
    others; the tasks finished before stay saved."""
    from herdsim.cli import gate as gate_rules
    from herdsim.experiments import sweep
    from herdsim.outputs import sweep_dir

    conditions = gate_rules.parse(fail_if)
    arms = parse_list("--strategies", strategies_)
    presets = parse_list("--presets", presets_)
    plan = sweep.plan(bundled.resolve(scenario), grid or [], arms, replications, parse_sets(set_),
                      presets, force)
    by_preset = any(axis.path == sweep.PRESET for axis in plan.axes)
    if by_preset and draw_map:
        raise UsageError("--map: the map's rows are strategies; a sweep over presets has "
                         "one row per preset in its cells table instead")
    target = out or plan.default_out()
    sweep_dir.check(target, plan.manifest())
    talk = not (quiet or json_)
    if talk:
        console.print(f"sweep {safe(plan.name)}: {plan.n_tasks} tasks ({plan.n_cells} cells, "
                      f"{len(plan.strategies)} strategies, {replications} replications), "
                      f"{len(sweep_dir.finished(target, plan.identity))} already done -> "
                      f"[bold]{safe(target)}[/]")
    try:
        sweep.run_sweep(plan, target, processes, scheduler, progress=talk)
    except TaskError as failed:  # one line: the task, the cause, and what stays written
        saved = len(sweep_dir.finished(target))
        error_lines([f"{failed}; " + (f"{saved} of {plan.n_tasks} tasks are saved in "
                                      f"{target}" if saved else "nothing was written")])
        raise typer.Exit(failed.exit_code) from None
    except KeyboardInterrupt:
        saved = len(sweep_dir.finished(target))
        err_console.print(f"interrupted: {saved} of {plan.n_tasks} tasks are saved in "
                          f"{safe(target)}; rerun the same command to continue" if saved else
                          "interrupted: nothing was written")
        raise typer.Exit(130) from None
    counts = _preset_counts(target) if by_preset else sweep_dir.class_counts(target)
    first = "preset" if by_preset else "strategy"
    written = [target / name for name in sweep_dir.TABLES]
    if draw_map:
        written += sweep_dir.save_map(target)
    runs, manifest = sweep_dir.load_sweep(target)
    if json_:
        emit_json(_json(runs, manifest, counts, first, target))
    elif not quiet:
        _print_counts(counts, first, written)
    gate(gate_rules.failing(conditions, _by_run(runs, manifest)))


def _print_counts(counts, first: str, written: list[Path]) -> None:
    """The cells of each strategy (or preset) by class, and the files written."""
    table = Table(title="cells by class", header_style="bold")
    for column in (first, *counts.columns):
        table.add_column(column, justify="left" if column == first else "right")
    for strategy, row in counts.iterrows():
        table.add_row(safe(strategy), *(str(n) for n in row))
    console.print(table)
    console.print("wrote " + ", ".join(safe(path) for path in written), soft_wrap=True)


def _run_name(row: dict, axes: list[str]) -> str:
    """``exponential downstream.outages.0.duration=2 #1``: one run of a sweep."""
    settings = " ".join(f"{axis}={row[axis]}" for axis in axes if axis in row)
    return f"{row.get('strategy', '?')} {settings} #{row.get('replication', 0)}".strip()


def _by_run(runs: pd.DataFrame, manifest: dict) -> dict[str, dict]:
    """Every run's summary, named by its strategy, cell and replication (for --fail-if)."""
    axes = [axis["path"] for axis in manifest["axes"]]
    rows = runs.astype(object).where(runs.notna(), None).to_dict("records")
    return {_run_name(row, axes): row for row in rows}


def _json(runs: pd.DataFrame, manifest: dict, counts: pd.DataFrame, first: str,
          target: Path) -> dict:
    """``herdsim sweep --json``: the class counts and one record per cell."""
    from herdsim.analysis import metastability

    axes = [axis["path"] for axis in manifest["axes"]]
    cells = metastability.cells(runs, axes)
    scenario = manifest.get("scenario")
    name = scenario.get("name") if isinstance(scenario, dict) else None
    return {"scenario": name or target.name, "out": str(target),
            "tasks": len(runs), "axes": axes,
            "counts": {str(k): {c: int(n) for c, n in row.items()}
                       for k, row in counts.iterrows()},
            "counted_by": first,
            "cells": cells.astype(object).where(cells.notna(), None).to_dict("records")}


def _preset_counts(target: Path) -> pd.DataFrame:
    """Cells of each class under each preset of a finished sweep over ``retry.preset``."""
    import pandas as pd

    from herdsim.analysis import metastability
    from herdsim.experiments import sweep
    from herdsim.outputs import sweep_dir

    runs, manifest = sweep_dir.load_sweep(target)
    table = metastability.cells(runs, [axis["path"] for axis in manifest["axes"]])
    presets = next(a["values"] for a in manifest["axes"] if a["path"] == sweep.PRESET)
    counts = pd.crosstab(table[sweep.PRESET], table["class"])
    return counts.reindex(index=presets, columns=list(metastability.CLASSES), fill_value=0)

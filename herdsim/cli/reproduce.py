"""``herdsim reproduce``: rerun a published experiment."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from herdsim.cli import complete
from herdsim.cli.app import OutOpt, ProcessesOpt, SetOpt, app, console, output_dir, parse_sets, safe
from herdsim.errors import UsageError


@app.command("reproduce")
def reproduce_command(
    experiment: Annotated[str, typer.Argument(
        metavar="EXPERIMENT", autocompletion=complete.experiments,
        help="aws-2015, collapse, retries or cache (see docs/validation.md).", show_default=False)],
    runs: Annotated[int | None, typer.Option(
        "--runs", min=1, metavar="N", help="Runs per point (default: the published number, 100 for "
                              "aws-2015; 20 for collapse and cache, 5 for retries).",
        show_default=False)
    ] = None,
    out: OutOpt = None,
    processes: ProcessesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Rerun a published experiment: print its table, write CSV and figure to --out.

    --set changes the experiment's scenario (scenarios/NAME.yaml), e.g.
    --set downstream.overload.latency_model=continuous."""
    from herdsim.analysis.kpis import format_value
    from herdsim.experiments.reproduce import EXPERIMENTS, reproduce

    if experiment not in EXPERIMENTS:
        raise UsageError(f"reproduce {experiment!r}: no such experiment; choose among "
                         + ", ".join(EXPERIMENTS))
    overrides = parse_sets(set_)
    target = output_dir(out, f"reproduce-{experiment}")
    result = reproduce(experiment, runs, processes, progress=True, overrides=overrides)
    result.save(target)
    for title, frame in result.printed():
        table = Table(title=f"{title}: means over {result.runs_per_point} runs per point",
                      header_style="bold", box=box.SIMPLE_HEAD)
        for column in frame.columns:
            table.add_column(str(column).replace("_", "\n"), justify="right")
        for row in frame.itertuples(index=False):
            cells = [value.item() if hasattr(value, "item") else value for value in row]
            table.add_row(*(format_value(v) for v in cells))
        console.print(table)
    console.print(f"outputs: [bold]{safe(target)}[/]", soft_wrap=True)



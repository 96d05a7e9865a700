"""``--timings`` of ``run`` and ``compare``: where the command's CPU and wall time went."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from herdsim.cli.app import err_console
from herdsim.system import timings

TimingsOpt = Annotated[bool, typer.Option(
    "--timings", help="At the end, on stderr: this process's CPU and wall seconds per phase "
                      "(start-up and imports, loading, simulating, analysing, saving each "
                      "file, drawing each figure) and in total.")]


def table(rows: list[timings.Row], children: float = 0.0) -> Table:
    """*rows* (:func:`herdsim.system.timings.stop`) as a table: seconds and share of CPU."""
    total = rows[-1].cpu or 1.0
    grid = Table(title="where this herdsim process's time went", show_header=True,
                 header_style="bold", title_justify="left")
    grid.add_column("phase")
    grid.add_column("CPU s", justify="right")
    grid.add_column("of CPU", justify="right")
    grid.add_column("wall s", justify="right")
    for row in rows:
        name = row.name + (f" ×{row.count}" if row.count > 1 else "")
        grid.add_row(name, f"{row.cpu:.3f}", f"{row.cpu / total:.0%}",
                     "–" if row.wall is None else f"{row.wall:.3f}",
                     end_section=row.name == "other")
    notes = ["CPU: user + system time of this process (time.process_time); start-up counts "
             "from the process's start; a phase counts the imports it triggers, not the "
             "phases inside it; ×N: met N times, the sum"]
    if children > 0:
        notes.append(f"its finished child processes (parallel arms) used {children:.3f} s "
                     "of CPU more, not in the total")
    grid.caption = "; ".join(notes)
    return grid


def report() -> None:
    """Stop timing and print the table on stderr (stdout stays the command's own)."""
    err_console.print(table(timings.stop(), timings.children_cpu()), soft_wrap=True)

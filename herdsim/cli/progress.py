"""Progress of one simulation in simulated time: ``progress(now_seconds, duration_seconds)``.

In a terminal a bar on stderr with simulated seconds, elapsed time and ETA; when stderr is
a pipe, a line every few seconds (:class:`herdsim.system.progress.Lines`); nothing
with ``--quiet`` or ``--json``. The engine calls it as it runs (``herdsim.run(scenario,
progress=...)``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from herdsim.system.progress import Lines


class SimProgress:
    """A context manager whose instance is the engine's progress callback."""

    def __init__(self, label: str, enabled: bool = True):
        console = Console(stderr=True)
        self.enabled = enabled
        if console.is_terminal:
            self.display: Progress | Lines = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(),
                TextColumn("{task.completed:,.1f} of {task.total:,.4g} s simulated"),
                TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                console=console, disable=not enabled, transient=True)
        else:
            self.display = Lines(unit="s simulated")
        self.label = label
        self.task: Any = None  # the display's id of the bar

    def __enter__(self) -> SimProgress:
        if self.enabled:
            self.display.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.display.__exit__(*exc)

    def __call__(self, now: float, duration: float) -> None:
        if not self.enabled:
            return
        if self.task is None:
            self.task = self.display.add_task(self.label, total=duration)
        self.display.update(self.task, completed=min(now, duration))

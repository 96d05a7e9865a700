"""What a long job shows on stderr while it runs: a rich progress bar in a terminal, and
in a pipe or a CI log (:class:`Lines`) a plain line every few seconds."""

from __future__ import annotations

import math
import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """Tasks per minute, measured over the recent past."""

    def render(self, task: Task) -> Text:
        per_minute = (task.speed or 0) * 60
        if not per_minute:
            return Text("–/min", style="progress.data.speed")
        digits = 0 if per_minute >= 10 else 1
        return Text(f"{per_minute:,.{digits}f}/min", style="progress.data.speed")


class Lines:
    """The progress bar's stand-in when stderr is not a terminal (a pipe, a CI log): one
    line every ``every`` seconds, ``label: done of total (x%), elapsed, eta``, and a last
    line when it ends. *unit* names what is counted (``runs``, ``s simulated``)."""

    def __init__(self, every: float = 5.0, unit: str = "tasks", stream=None):
        self.every, self.unit = every, unit
        self.stream = stream if stream is not None else sys.stderr
        self.tasks: dict[int, list] = {}

    def __enter__(self) -> Lines:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            for task, entry in self.tasks.items():
                if entry[2] != entry[5]:  # the last state was not printed yet
                    self._print(task)

    def add_task(self, description: str, total: float | None = None, **_) -> int:
        # description, total, done, started, last printed at, done when last printed
        self.tasks[len(self.tasks)] = [description, total, 0.0, time.monotonic(), -math.inf,
                                       None]
        return len(self.tasks) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, completed=self.tasks[task][2] + advance)

    def update(self, task: int, completed: float) -> None:
        entry = self.tasks[task]
        entry[2] = completed
        now = time.monotonic()
        if now - entry[4] >= self.every:
            self._print(task)

    def print(self, text: str) -> None:
        """A line of its own (an arm finished), between the progress lines."""
        print(text, file=self.stream, flush=True)

    def _print(self, task: int) -> None:
        description, total, done, started, _, _ = self.tasks[task]
        now = time.monotonic()
        self.tasks[task][4:] = [now, done]
        elapsed = now - started
        line = f"{description}: {done:,.4g} {self.unit}"
        if total:
            line = f"{description}: {done:,.4g} of {total:,.4g} {self.unit} ({done / total:.0%})"
            if 0 < done < total:
                line += f", eta {_clock(elapsed * (total - done) / done)}"
        print(f"{line}, elapsed {_clock(elapsed)}", file=self.stream, flush=True)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def progress_bar(enabled: bool = True) -> Progress | Lines:
    """A rich progress bar on stderr: tasks done, rate, elapsed time and ETA; when stderr
    is not a terminal, a line every few seconds instead (:class:`Lines`)."""
    console = Console(stderr=True)
    if enabled and not console.is_terminal:
        return Lines(unit="runs")
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
        transient=False,
    )

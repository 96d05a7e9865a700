"""Run independent tasks in local processes, yielding results as they finish.

Used by ``compare`` (arms x replications) and ``sweep`` (cells x arms x replications).
Each task must be a picklable ``(function, argument)`` pair; results stream back in
completion order, tagged with the task's index, so callers can write them as they come.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")


def default_processes() -> int:
    return os.cpu_count() or 1


def progress_bar(enabled: bool = True) -> Progress:
    """A rich progress bar showing tasks done, rate-derived ETA and elapsed time."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )


def imap_unordered(
    func: Callable[[Any], T],
    args: Iterable[Any],
    processes: int | None = None,
    label: str | None = None,
) -> Iterator[tuple[int, T]]:
    """Yield ``(index, func(arg))`` for every arg, in completion order.

    ``processes=1`` runs serially in this process (same results, easier to debug).
    ``label`` shows a progress bar on stderr with that description.
    """
    args = list(args)
    processes = processes or default_processes()
    with progress_bar(enabled=label is not None) as bar:
        task = bar.add_task(label or "", total=len(args))
        if processes == 1 or len(args) <= 1:
            for index, arg in enumerate(args):
                yield index, func(arg)
                bar.advance(task)
            return
        with ProcessPoolExecutor(max_workers=min(processes, len(args))) as pool:
            pending = {pool.submit(func, arg): index for index, arg in enumerate(args)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    yield index, future.result()
                    bar.advance(task)

"""Run independent tasks in parallel, yielding results as they finish.

Used by ``compare`` (arms x replications) and ``sweep`` (cells x arms x replications).
Each task is a picklable ``(function, argument)`` pair; results stream back in completion
order, tagged with the task's index, so callers can write them as they come.

Three executors run the same tasks with the same results:

- serial (``processes=1``): in this process, easiest to debug;
- local processes (the default): a process pool over all the cores this process may use;
- Dask (``scheduler=``): ``"local"`` starts a ``LocalCluster`` for the call, any other
  value is the address of a running scheduler (``tcp://host:8786``). Needs
  ``pip install 'herdsim[dask]'``, and herdsim installed on every worker.

At most ``2 x workers`` tasks are submitted ahead of the results read back, so the
driver's memory does not grow with the number of tasks.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Sized
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from herdsim.errors import ExecutorError
from herdsim.system.children import die_with_parent
from herdsim.system.progress import Lines, progress_bar

T = TypeVar("T")
AHEAD = 2  # tasks submitted per worker before waiting for a result
CONNECT_TIMEOUT = "10s"


def default_processes() -> int:
    """The number of cores this process may run on."""
    with contextlib.suppress(AttributeError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def imap_unordered(
    func: Callable[[Any], T],
    args: Iterable[Any],
    processes: int | None = None,
    label: str | None = None,
    scheduler: str | None = None,
    total: int | None = None,
    note: Callable[[int, T], str | None] | None = None,
) -> Iterator[tuple[int, T]]:
    """Yield ``(index, func(arg))`` for every arg, in completion order.

    ``processes=1`` runs serially in this process (same results, easier to debug);
    otherwise ``processes`` local processes (default: every core), or, with
    ``scheduler``, the workers of a Dask cluster (``processes`` then sizes a
    ``"local"`` cluster). *args* may be a lazy iterable: pass ``total`` for the progress
    bar when it has no length. ``label`` shows a progress bar on stderr, and *note*, given
    each ``(index, result)``, a line to print above it (None: nothing), e.g. an arm done.
    """
    if total is None and isinstance(args, Sized):
        total = len(args)
    processes = processes or default_processes()
    with progress_bar(enabled=label is not None) as bar:
        task = bar.add_task(label or "", total=total)
        if scheduler:
            results = _dask(func, args, scheduler, processes)
        elif processes == 1 or (total is not None and total <= 1):
            results = ((index, func(arg)) for index, arg in enumerate(args))
        else:
            results = _pool(func, args, processes if total is None else min(processes, total))
        # closing: stops the workers if the caller stops early
        with contextlib.closing(results):  # type: ignore[type-var]  # a generator
            for item in results:
                yield item
                bar.advance(task)  # type: ignore[arg-type]
                text = note(*item) if note is not None and label is not None else None
                if text:
                    (bar.print if isinstance(bar, Lines) else bar.console.print)(text)


def _init_worker() -> None:
    """Pool workers leave Ctrl-C to the driver, which stops them, and die with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Stop *pool* without waiting for the tasks running in it (Ctrl-C, an error, or a
    caller that stopped reading): cancel what is queued, terminate the workers."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        with contextlib.suppress(OSError, ValueError):
            process.terminate()
    for process in workers:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(5)


def _pool(func: Callable[[Any], T], args: Iterable[Any], processes: int
          ) -> Iterator[tuple[int, T]]:
    todo = enumerate(args)
    pool = ProcessPoolExecutor(max_workers=processes, initializer=_init_worker)
    pending: dict[Future, int] = {}

    def submit(count: int) -> None:
        for index, arg in itertools.islice(todo, count):
            pending[pool.submit(func, arg)] = index

    complete = False
    try:
        submit(AHEAD * processes)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()
                submit(1)
        complete = True
    finally:
        if complete:
            pool.shutdown(wait=True)
        else:
            _stop_now(pool)


def _dask(func: Callable[[Any], T], args: Iterable[Any], scheduler: str, processes: int
          ) -> Iterator[tuple[int, T]]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ExecutorError(
            f"--scheduler {scheduler}: Dask is not installed; pip install 'herdsim[dask]'"
        ) from None
    todo = enumerate(args)
    with contextlib.ExitStack() as stack:
        if scheduler == "local":
            address: Any = stack.enter_context(LocalCluster(
                n_workers=processes, threads_per_worker=1, dashboard_address=None,
                silence_logs=logging.ERROR))
        else:
            address = scheduler
        try:
            client = stack.enter_context(Client(address, timeout=CONNECT_TIMEOUT))
        except (OSError, ValueError) as exc:
            raise ExecutorError(
                f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})"
            ) from None
        workers = max(1, sum(client.nthreads().values()))
        index_of: dict[str, int] = {}
        running = as_completed()

        def submit(count: int) -> None:
            for index, arg in itertools.islice(todo, count):
                future = client.submit(func, arg, pure=False)
                index_of[future.key] = index
                running.add(future)

        submit(AHEAD * workers)
        try:
            for future in running:
                result = future.result()
                yield index_of.pop(future.key), result
                future.release()
                submit(1)
        finally:
            running.clear()

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

A task that raises ends the call, in every executor alike: its worker catches the
exception and sends it back as plain text (:class:`Failure`: an exception may not pickle,
or not unpickle), the driver stops every other task at once (pool workers are killed:
they die on SIGTERM, whatever handler the driver has) and raises one
:class:`~herdsim.errors.TaskError` naming the task and the cause.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sized
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from herdsim.errors import ExecutorError, HerdsimError, TaskError
from herdsim.system import signals
from herdsim.system.children import die_with_parent
from herdsim.system.progress import Lines, progress_bar

T = TypeVar("T")
AHEAD = 2  # tasks submitted per worker before waiting for a result
CONNECT_TIMEOUT = "10s"
HANDSHAKE_TIMEOUT = 15.0  # seconds to connect (CONNECT_TIMEOUT) and hear the handshake
STOP_GRACE = 2.0  # seconds a stopped pool worker has to die before it is killed
PACKAGE = Path(__file__).resolve().parents[1]  # herdsim/: where a bug's frame is named from


@dataclass(frozen=True)
class Failure:
    """What a task raised, as plain text: a worker returns it instead of raising, so it
    crosses any process boundary (an exception that does not pickle, or that cannot be
    rebuilt from its ``args``, would break a pool or be lost)."""

    cause: str  # the exception's class name
    message: str
    user: bool  # a herdsim error: the user's input, not a bug
    where: str  # the innermost frame, ``herdsim/model/worker.py:150 in retry`` ("": none)
    traceback: str

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        frames = traceback.extract_tb(exc.__traceback__)
        where = ""
        if frames:
            path = Path(frames[-1].filename)
            shown = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE) else path
            where = f"{shown}:{frames[-1].lineno} in {frames[-1].name}"
        try:
            message = str(exc)
        except Exception:  # a message that cannot be shown: the class says enough
            message = ""
        return cls(type(exc).__name__, message, isinstance(exc, HerdsimError), where,
                   "".join(traceback.format_exception(exc)))

    def error(self, run: str) -> TaskError:
        """The error the driver raises for the task called *run*."""
        return TaskError(run, self.cause, self.message, self.user, self.where, self.traceback)


class TaskTraceback(Exception):
    """The traceback of a task's exception, as text: a :class:`TaskError`'s cause, so a
    Python user sees where the task raised."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _guarded(func: Callable[[Any], T], arg: Any) -> T | Failure:
    """``func(arg)``, or the :class:`Failure` it raised (Ctrl-C still raises)."""
    try:
        return func(arg)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # every failure goes back as text, sys.exit() too
        return Failure.of(exc)


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
    name: Callable[[int, Any], str] | None = None,
) -> Iterator[tuple[int, T]]:
    """Yield ``(index, func(arg))`` for every arg, in completion order.

    ``processes=1`` runs serially in this process (same results, easier to debug);
    otherwise ``processes`` local processes (default: every core), or, with
    ``scheduler``, the workers of a Dask cluster (``processes`` then sizes a
    ``"local"`` cluster). *args* may be a lazy iterable: pass ``total`` for the progress
    bar when it has no length. ``label`` shows a progress bar on stderr, and *note*, given
    each ``(index, result)``, a line to print above it (None: nothing), e.g. an arm done.

    A task that raises stops every other task and raises :class:`TaskError`, naming the
    task with *name* given its ``(index, arg)`` (default ``task <index>``).
    """
    if total is None and isinstance(args, Sized):
        total = len(args)
    processes = processes or default_processes()
    with progress_bar(enabled=label is not None) as bar:
        task = bar.add_task(label or "", total=total)
        if scheduler:
            results = _dask(func, args, scheduler, processes)
        elif processes == 1 or (total is not None and total <= 1):
            results = ((index, arg, _guarded(func, arg)) for index, arg in enumerate(args))
        else:
            results = _pool(func, args, processes if total is None else min(processes, total))
        # closing: stops the workers if the caller (or a failed task) stops early
        with contextlib.closing(results):  # type: ignore[type-var]  # a generator
            for index, arg, result in results:
                if isinstance(result, Failure):
                    raise result.error(name(index, arg) if name else f"task {index}") \
                        from TaskTraceback(result.traceback)
                yield index, result
                bar.advance(task)  # type: ignore[arg-type]
                text = note(index, result) if note is not None and label is not None else None
                if text:
                    (bar.print if isinstance(bar, Lines) else bar.console.print)(text)


def _init_worker() -> None:
    """Pool workers leave Ctrl-C to the driver, which stops them, die when it stops them
    (SIGTERM and SIGHUP back to their default: a forked worker inherits the driver's
    handler, which would turn ``terminate()`` into an exception in the task it runs,
    caught by the pool, and the worker would go on to the next task), and die with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in signals.ENDING:
        signal.signal(signum, signal.SIG_DFL)
    die_with_parent()


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Stop *pool* without waiting for the tasks running in it (Ctrl-C, a failed task, or a
    caller that stopped reading): cancel what is queued, terminate the workers, kill any
    still alive after :data:`STOP_GRACE` seconds, and let the pool's manager thread close
    its pipes before this returns (left to the interpreter's exit, that clean-up races
    the exit's own wake-up of the thread: an ``EBADF`` traceback, seen once)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        with contextlib.suppress(OSError, ValueError):
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for process in workers:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(STOP_GRACE)
    if manager is not None:
        manager.join(STOP_GRACE)


def _outcome(future: Any) -> Any:
    """A finished future's result, or the :class:`Failure` of what stopped its task outside
    the task (a worker killed, out of memory, a Dask worker lost)."""
    error = future.exception()
    return future.result() if error is None else Failure.of(error)


def _pool(func: Callable[[Any], T], args: Iterable[Any], processes: int
          ) -> Iterator[tuple[int, Any, T | Failure]]:
    todo = enumerate(args)
    pool = ProcessPoolExecutor(max_workers=processes, initializer=_init_worker)
    pending: dict[Future, tuple[int, Any]] = {}

    def submit(count: int) -> None:
        for index, arg in itertools.islice(todo, count):
            pending[pool.submit(_guarded, func, arg)] = (index, arg)

    complete = False
    try:
        submit(AHEAD * processes)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield *pending.pop(future), _outcome(future)
                submit(1)
        complete = True
    finally:
        if complete:
            pool.shutdown(wait=True)
        else:
            _stop_now(pool)


def _handshake(scheduler: str) -> None:
    """Connect to *scheduler* and complete Dask's handshake within
    :data:`HANDSHAKE_TIMEOUT` (Dask bounds the connection, not the handshake: a peer that
    accepts and never answers would hang ``Client`` for ever), or raise
    :class:`ExecutorError`."""
    import asyncio

    from dask.utils import parse_timedelta
    from distributed.comm import connect
    from distributed.security import Security

    seconds = parse_timedelta(CONNECT_TIMEOUT)

    async def shake() -> None:
        comm = await asyncio.wait_for(connect(
            scheduler, timeout=seconds, **Security().get_connection_args("client")),
            HANDSHAKE_TIMEOUT)
        await comm.close()

    try:
        asyncio.run(shake())
    except (asyncio.TimeoutError, TimeoutError):
        raise ExecutorError(f"--scheduler {scheduler}: no Dask handshake within "
                            f"{HANDSHAKE_TIMEOUT:g} s (something listens there, but not a "
                            "Dask scheduler?)") from None
    except (OSError, ValueError, TypeError) as exc:
        raise ExecutorError(
            f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})") from None


def _dask(func: Callable[[Any], T], args: Iterable[Any], scheduler: str, processes: int
          ) -> Iterator[tuple[int, Any, T | Failure]]:
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
                silence_logs=logging.CRITICAL))  # failures: ours to say
        else:
            address = scheduler
            _handshake(scheduler)
        try:
            client = stack.enter_context(Client(address, timeout=CONNECT_TIMEOUT))
        except (OSError, ValueError) as exc:
            raise ExecutorError(
                f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})"
            ) from None
        workers = max(1, sum(client.nthreads().values()))
        index_of: dict[str, tuple[int, Any]] = {}
        running = as_completed()

        def submit(count: int) -> None:
            for index, arg in itertools.islice(todo, count):
                future = client.submit(_guarded, func, arg, pure=False)
                index_of[future.key] = (index, arg)
                running.add(future)

        submit(AHEAD * workers)
        try:
            for future in running:
                result = _outcome(future)
                yield *index_of.pop(future.key), result
                future.release()
                submit(1)
        finally:
            running.clear()

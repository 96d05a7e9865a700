"""Where a command's time goes, for ``--timings``: CPU and wall seconds per phase.

Off unless :func:`start` was called: :func:`phase` then costs one test of a module global.
Phases are coarse (load, simulate, save one file, draw one figure), never inside the
simulation. A phase inside another is taken out of the outer one, so the rows never count
a second twice; a phase met again (one per arm) adds to its row. A phase counts the imports
it triggers on first use; the first row, ``start-up and imports``, runs from the process's
start (the interpreter, then every import before the command's first step).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

try:
    import resource
except ImportError:  # Windows: no child processes' CPU
    resource = None  # type: ignore[assignment]

STARTUP = "start-up and imports"


@dataclass
class Row:
    """One phase: its name, this process's CPU seconds in it, its wall seconds (None when
    the platform cannot tell, as for start-up outside Linux) and how often it was met."""

    name: str
    cpu: float
    wall: float | None
    count: int = 1


_rows: dict[str, Row] | None = None  # None: not timing
_inner: list[list[float]] = []  # per open phase: the CPU and wall of the phases inside it
_began: tuple[float, float] = (0.0, 0.0)  # process_time, perf_counter at start()


def since_process_start() -> float | None:
    """Wall seconds since this process started (Linux: ``/proc/self/stat``'s start time
    against the boot clock, to a clock tick), or None elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as stream:
            fields = stream.read().rpartition(b")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: ticks after boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def start() -> None:
    """Begin timing: the first row is the CPU this process used before now
    (:func:`time.process_time` counts from its start) and the wall time since it began."""
    global _rows, _began
    _began = (time.process_time(), time.perf_counter())
    _rows = {STARTUP: Row(STARTUP, _began[0], since_process_start())}
    _inner.clear()


def active() -> bool:
    """True between :func:`start` and :func:`stop`."""
    return _rows is not None


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as the phase *name* when timing is on, less the phases inside it."""
    if _rows is None:
        yield
        return
    row = _rows.setdefault(name, Row(name, 0.0, 0.0, 0))  # rows in the order first begun
    cpu, wall = time.process_time(), time.perf_counter()
    _inner.append([0.0, 0.0])
    try:
        yield
    finally:
        spent = (time.process_time() - cpu, time.perf_counter() - wall)
        inside = _inner.pop()
        if _inner:  # the outer phase does not count this one
            _inner[-1][0] += spent[0]
            _inner[-1][1] += spent[1]
        if _rows is not None:
            row.cpu += spent[0] - inside[0]
            row.wall = (row.wall or 0.0) + spent[1] - inside[1]
            row.count += 1


def children_cpu() -> float:
    """CPU seconds of this process's finished child processes (the workers of a parallel
    comparison), 0 where the platform does not say."""
    if resource is None:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stop() -> list[Row]:
    """End timing: the phases, then ``other`` (what no phase covered) and ``total`` (this
    process from its start)."""
    global _rows
    rows, _rows = list((_rows or {}).values()), None
    cpu, wall = time.process_time(), time.perf_counter()
    start_wall = rows[0].wall if rows else None
    total_wall = None if start_wall is None else start_wall + wall - _began[1]
    timed_cpu = sum(row.cpu for row in rows)
    timed_wall = sum(row.wall or 0.0 for row in rows[1:])
    rows.append(Row("other", cpu - timed_cpu, wall - _began[1] - timed_wall))
    rows.append(Row("total", cpu, total_wall))
    return rows

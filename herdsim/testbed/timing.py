"""Honest timing: how late the testbed's processes were, and whether a run counts.

Every process keeps a clock whose zero is the run's start ``t0`` (a ``time.monotonic()``
instant, the same for every process on one machine) and records three kinds of lateness,
in seconds:

* ``timer``: a retry sleep, a poll or a service timer woke this long after it was due;
* ``loop``: the event loop's lag: a probe sleeping ``LOOP_PROBE`` at a time records how
  much longer each sleep took (what every callback waiting on the loop waited);
* ``producer``: a job was pushed this long after its arrival time.

A run is valid when the p99 of every kind stays within ``BOUND`` (5 ms): then what was
measured is the scenario, not a machine that could not keep up.
"""

from __future__ import annotations

import asyncio
import time
from array import array

import numpy as np

KINDS = ("timer", "loop", "producer")
BOUND = 0.005  # s: the p99 lateness a valid run stays within
LOOP_PROBE = 0.01  # s between two event-loop lag probes


class Clock:
    """Seconds since ``t0`` on the event loop's clock (``time.monotonic``)."""

    def __init__(self, t0: float):
        self.t0 = t0

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def sleep_until(self, t: float, late: array | None = None) -> None:
        """Sleep until run time *t*; append how late the wake was to *late*."""
        delay = t - self.now()
        if delay > 0:
            await asyncio.sleep(delay)
        if late is not None:
            late.append(max(0.0, self.now() - t))


class Lateness:
    """The lateness samples of one process, by kind."""

    def __init__(self) -> None:
        self.samples = {kind: array("d") for kind in KINDS}

    async def probe_loop(self, clock: Clock, until: float) -> None:
        """Sample the event loop's lag every ``LOOP_PROBE`` until run time *until*."""
        lag = self.samples["loop"]
        loop = asyncio.get_running_loop()
        while clock.now() < until:
            asked = loop.time()
            await asyncio.sleep(LOOP_PROBE)
            lag.append(max(0.0, loop.time() - asked - LOOP_PROBE))


def above(value: float, limit: float) -> str:
    """*value* (> *limit*) to one decimal, or as many more as show it above *limit*
    (5.02, not 5.0, over a 5 ms bound)."""
    for digits in range(1, 7):
        shown = f"{value:.{digits}f}"
        if float(shown) > limit:
            return shown
    return f"{value:g}"


def summarize(samples: dict[str, np.ndarray], bound: float = BOUND) -> dict:
    """The lateness KPIs of a run from every process's samples (seconds, in milliseconds
    in the summary), and whether the run is valid with the reason when it is not."""
    out: dict = {}
    reasons = []
    worst, latest = 0.0, 0.0
    for kind in KINDS:
        values = np.asarray(samples.get(kind, ()), dtype=float)
        p99 = float(np.quantile(values, 0.99)) if values.size else 0.0
        out[f"lateness_{kind}_p99_ms"] = p99 * 1e3
        worst = max(worst, p99)
        latest = max(latest, float(values.max()) if values.size else 0.0)
        if p99 > bound:
            reasons.append(f"{kind} p99 {above(p99 * 1e3, bound * 1e3)} ms")
    out["lateness_p99_ms"] = worst * 1e3
    out["lateness_max_ms"] = latest * 1e3
    out["lateness_bound_ms"] = bound * 1e3
    out["testbed_valid"] = not reasons
    out["testbed_invalid_reason"] = (
        f"the machine could not keep up: {', '.join(reasons)} above the "
        f"{bound * 1e3:g} ms bound" if reasons else None)
    return out

"""The work of a connection herd (``downstream.model: broker``), read off the scenario.

Its clients start connected and make calls (connects) only when their connections drop:

    drops    = clients x (outages that drop them + crashes that can fit: duration / restart)
    connects = drops x attempts(retry)         (1 + max_retries; null: 20 assumed, flagged)
               and at most clients x (1 + (duration - first drop) / least sleep)
    memory   = clients x BYTES_PER_CLIENT + drops x a job's bytes + connects x a call's

Time bounds the connects too: a client sleeps its backoff before each connect, one after
another, so it makes at most one connect per least sleep of the strategy (read off its
closed form, ``cdf``) from the first drop to the end, however often it drops; without a
retry limit (the 20 assumed) its mean first sleep stands in for the least (a full
jitter's least is 0).

The likely connects take the retries only while something is disturbed, as the queue
model's calls do (:func:`herdsim.planning.calls.attempts`); a crash is counted likely once
per outage, and at most as often as the broker can restart within the run.
"""

from __future__ import annotations

import math

import numpy as np

from herdsim.config import graph
from herdsim.config.scenario import Scenario
from herdsim.planning.calls import Tier, attempts
from herdsim.policies.downstreams.broker import BYTES_PER_CLIENT

WORK_PER_CONNECT = 1.0  # a connect attempt: its event, the broker's answer, the next sleep
WORK_PER_DROP = 3.0  # a connection dropped: its client's state, its job, its first sleep
# (both in calibration calls; measured with benchmarks/reconnect.py, docs/scaling.md)


def drops(scenario: Scenario) -> tuple[float, float]:
    """``(most, likely)`` times every connection may drop: at each outage that drops it
    (one that refuses or hangs), and at each crash (at most one a restart time: a crashed
    broker refuses every connect until it restarts)."""
    cfg = scenario.downstream
    outages = sum(1 for o in cfg.outages if o.refuses or o.needs_timeout)
    collapse = cfg.overload.collapse
    if collapse is None:
        return float(outages), float(outages)
    crashes = math.floor(scenario.duration / collapse.restart_time) + 1  # restart apart
    return float(outages + crashes), float(outages + min(crashes, max(outages, 1)))


def tries_in_time(scenario: Scenario, unlimited: bool) -> float:
    """Connects one client can make from the first drop to the run's end, one per sleep:
    with the least sleep of any retry (a bound), or without a retry limit the mean first
    sleep (as assumed as the 20 tries); inf when the strategy has no closed form or may
    sleep 0."""
    strategy = scenario.retry.build()
    cdf = getattr(strategy, "cdf", None)
    if cdf is None:
        return math.inf
    grid = np.linspace(0.0, strategy.cap, 4097)
    shares = np.array([cdf(grid, k, strategy.base) for k in range(64)], dtype=float)
    if unlimited:  # the mean first sleep: the area above its cdf
        gap = float(np.trapezoid(1.0 - shares[0], grid))
    else:  # the least sleep: the last grid point no sleep of any retry reaches
        below = np.asarray((shares <= 0.0).all(axis=0))
        gap = float(grid[np.flatnonzero(below)[-1]]) if below[0] else 0.0
    drops = [o.start for o in scenario.downstream.outages if o.refuses or o.needs_timeout]
    seconds = scenario.duration - min(drops, default=0.0)
    return math.floor(seconds / gap) + 1.0 if gap > 0 else math.inf


def estimate(scenario: Scenario, disturbed: float, base_bytes: float, bytes_per_job: float,
             bytes_per_call: float, bytes_per_bin: float) -> dict:
    """The fields of :class:`~herdsim.planning.estimate.Estimate` for a broker scenario
    (the memory costs the queue model's are passed in: one table of them)."""
    clients = float(scenario.workers.count or 0)
    most_drops, likely_drops = drops(scenario)
    most_tries, likely_tries, unlimited = attempts(scenario.retry, None, disturbed)
    in_time = tries_in_time(scenario, unlimited)
    jobs = clients * likely_drops
    calls = clients * min(most_drops * most_tries, in_time)
    likely = min(jobs * likely_tries, calls)
    rows = math.ceil(scenario.duration / scenario.bin)
    parts = (("jobs", jobs * bytes_per_job), ("calls", likely * bytes_per_call),
             ("bins", rows * bytes_per_bin), ("workers", clients * BYTES_PER_CLIENT))
    fixed = base_bytes + parts[2][1] + parts[3][1]
    most_bytes = fixed + clients * most_drops * bytes_per_job + calls * bytes_per_call
    return {"jobs": jobs, "calls": calls, "rows": rows,
            "bytes": base_bytes + sum(b for _, b in parts), "events": calls * 2 + rows,
            "parts": parts, "unlimited": unlimited, "likely": likely,
            "work": jobs * WORK_PER_DROP + likely * WORK_PER_CONNECT,
            "most_work": clients * most_drops * WORK_PER_DROP + calls * WORK_PER_CONNECT,
            "most_bytes": most_bytes,
            "tiers": (Tier(graph.top_name(scenario.downstream), most_tries, likely_tries,
                           unlimited),)}

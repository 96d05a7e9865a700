"""The rules KPIs are computed by: peaks on short windows, recovery, goodput, latency
(each KPI of :mod:`herdsim.analysis.kpis` calls them from its ``compute``).

Every rule here is documented in ``docs/model.md`` ("What the summary measures").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis import metastability
from herdsim.config.scenario import Scenario
from herdsim.policies import downstreams
from herdsim.policies.arrivals.piecewise import Piecewise

RECOVERY_RATE_WINDOW = 1.0  # s, trailing window of the success-rate check (at least)
RECOVERY_EXPECTED = 100  # successes the window must expect: widened until it does
NOISE_SIGMAS = 4  # a window this many Poisson standard deviations low is a relapse, not noise
RECOVERY_GOODPUT = 0.9  # success rate must be back to 90% of its pre-outage level
RECOVERY_BACKLOG_SLACK = 0.5  # s of offered traffic allowed above the pre-outage backlog
PRE_OUTAGE_WINDOW = 10.0  # s before the first outage used as "normal"
STORM_LEVEL = 0.01  # a retry storm lasts while retries exceed 1% of the offered rate
UNBOUNDED_FACTOR = 1000  # capacity above 1000x the offered rate: "unbounded", shown n/a


CHUNK = 1 << 20  # windows counted at a time: the temporaries stay small on long runs


def peak_rate(times: np.ndarray, window: float) -> float:
    """Events per second in the busiest window of width *window* (times sorted)."""
    times = np.asarray(times, dtype=float)
    if times.size == 0:
        return 0.0
    most = 0
    for start in range(0, times.size, CHUNK):
        ends = np.searchsorted(times, times[start:start + CHUNK] + window, side="left")
        ends -= np.arange(start, start + ends.size)
        most = max(most, int(ends.max()))
    return float(most / window)


def peak_over_mean(values: pd.Series | np.ndarray) -> float | None:
    """The busiest sample over the mean of the samples (None when all are zero)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0 or values.mean() == 0:
        return None
    return float(values.max() / values.mean())


def storm_mask(rate: np.ndarray, times: np.ndarray, start: float, threshold: float
               ) -> np.ndarray:
    """Mask of a storm: from *start* to the last sample whose *rate* (per second) exceeds
    *threshold*. Works on binned counts turned into rates and on PromQL ``rate()`` output."""
    rate = np.nan_to_num(np.asarray(rate, dtype=float))
    active = np.flatnonzero((times >= start) & (rate > threshold))
    if active.size == 0:
        return np.zeros(len(times), dtype=bool)
    return (times >= start) & (times <= times[active[-1]])


def storm_threshold(scenario: Scenario, baseline: float = 0.0) -> float:
    """Retries/s that still count as a storm: 1% of the offered rate above *baseline*."""
    return baseline + STORM_LEVEL * scenario.workload.rate


def retry_storm(ts: pd.DataFrame, scenario: Scenario) -> np.ndarray:
    """Bins of the retry storm: from the first outage to when the retry rate (trailing 1 s)
    falls back under its pre-outage mean plus 1% of the offered rate, for good."""
    start = scenario.first_outage_start
    if start is None:
        return np.zeros(len(ts), dtype=bool)
    times = ts["time"].to_numpy()
    k = max(1, int(round(1.0 / scenario.bin)))
    rate = ts["retry"].rolling(k, min_periods=1).sum().to_numpy() / (k * scenario.bin)
    before = times < start
    baseline = float(rate[before].mean()) if before.any() else 0.0
    return storm_mask(rate, times, start, storm_threshold(scenario, baseline))


def recovery_time(ts: pd.DataFrame, scenario: Scenario) -> float | None:
    """Seconds from the end of the last outage until the run is healthy for good.

    Healthy: the downstream is up, the success rate over the trailing window is at least
    90% of its level in the 10 s before the first outage (or of the offered goodput when
    there is no such period; 4 Poisson standard deviations below it when that is lower),
    and the backlog is within half a second of offered traffic of its pre-outage maximum.
    The window is a second, widened until it expects :data:`RECOVERY_EXPECTED` successes
    at the offered rate (at 9.5 jobs/s about 11 s), so that the floor means something: at
    16 or fewer expected successes 4 standard deviations reach zero and a dead downstream
    would pass (at 100 the floor is 60). The backlog is what callers wait in: the main
    queue and jobs waiting to retry; in open loop (no main queue) every caller still
    waiting (in flight, in the waiting room, or sleeping before a retry). ``None`` when
    the run has no outage, ends unhealthy, or is healthy for less than its last window.
    """
    first, last = scenario.first_outage_start, scenario.last_outage_end
    if first is None or last is None:
        return None
    return settle_time(ts, scenario, first, last)


def settle_time(ts: pd.DataFrame, scenario: Scenario, first: float, end: float
                ) -> float | None:
    """Seconds from *end* until the run is healthy for good, the reference taken before
    *first* (the rule of :func:`recovery_time`, for any trigger window)."""
    width = scenario.bin
    times = ts["time"].to_numpy()
    offered = scenario.workload.rate
    k = window_bins(scenario)
    success_rate = ts["success"].rolling(k, min_periods=k).sum().to_numpy() / (k * width)
    backlog = (ts["queue_depth"] + ts["delayed"]).to_numpy()
    if scenario.workers.count is None:  # open loop: every caller still waiting
        backlog = backlog + (ts["in_flight"] + ts["waiting"]).to_numpy()
    before = max(PRE_OUTAGE_WINDOW, 4 * k * width)  # "normal": at least four windows
    pre = (times >= first - before) & (times < first - width * k)
    if pre.sum() >= k:
        reference = float(np.nanmean(success_rate[pre]))
        backlog_limit = float(backlog[times < first][-k * 10:].max())
    else:
        reference = offered * (1 - scenario.workload.poison_fraction)
        backlog_limit = own_queue(scenario)
    backlog_limit += RECOVERY_BACKLOG_SLACK * offered
    # 90% of the reference, or NOISE_SIGMAS Poisson standard deviations below it when that
    # is lower (at low rates a 10% dip over one window is noise, not a relapse).
    expected = reference * k * width
    floor = min(RECOVERY_GOODPUT * expected,
                expected - NOISE_SIGMAS * np.sqrt(expected)) / (k * width)
    healthy = (
        (ts["downstream_up"].to_numpy() > 0)
        & (np.nan_to_num(success_rate) >= floor)
        & (backlog <= backlog_limit)
    )
    after = times >= end
    if not healthy[-1] or not after.any():  # no bin starts after the outage: can't judge
        return None
    unhealthy = np.flatnonzero(after & ~healthy)
    first_good = unhealthy[-1] + 1 if unhealthy.size else np.flatnonzero(after)[0]
    if times[-1] + width - times[first_good] < k * width:
        return None
    return float(max(0.0, times[first_good] - end))


def own_queue(scenario: Scenario) -> float:
    """The backlog a healthy downstream holds of the arrivals themselves, the limit when
    no stretch before the trigger shows one: the jobs the source brings in one instant
    (25 monitors in step queue 25) and, in open loop, the calls in service (held, not
    waiting)."""
    ds = scenario.downstream
    serving = ds.concurrency * (ds.replicas or 1) if scenario.workers.count is None else 0
    return float(scenario.workload.source().together() + serving)


def window_bins(scenario: Scenario) -> int:
    """Bins of the success-rate window: :data:`RECOVERY_RATE_WINDOW`, widened until the
    offered rate of jobs that can succeed expects :data:`RECOVERY_EXPECTED` in it; never
    more than one bin over the run (no such window fits: nothing settles), however rare
    the jobs that can succeed."""
    good = scenario.workload.rate * (1 - scenario.workload.poison_fraction)
    base = int(round(RECOVERY_RATE_WINDOW / scenario.bin))
    run = math.ceil(scenario.duration / scenario.bin) + 1
    wide = (min(run, math.ceil(RECOVERY_EXPECTED / good / scenario.bin - 1e-9))
            if good > 0 else 0)
    return max(1, base, wide)


def job_latencies(jobs: pd.DataFrame, end: float) -> tuple[np.ndarray, float | None]:
    """The time in the system of every submitted job: arrival to success or dead letter,
    and for a job still pending its age at *end* (a lower bound of its latency: a run that
    stops mid-storm must not look fast because only its lucky jobs finished).
    Returns ``(latencies, oldest pending age or None)``: a new array, in job order."""
    pending = (jobs["outcome"] == "pending").to_numpy()
    latency = jobs["latency"].to_numpy(copy=True)
    ages = end - jobs["arrival"].to_numpy()[pending]
    latency[pending] = ages
    return latency, (float(ages.max()) if ages.size else None)


QUANTILES = {"latency_p50": 0.5, "latency_p99": 0.99}  # summary key -> quantile


def order_statistic(values: np.ndarray, q: float) -> int:
    """The 0-based rank of the *q*-quantile of *values* as an order statistic (the
    inverted CDF: the smallest value with at least a share *q* of values at or below it),
    so that a bound on every value is a bound on the quantile."""
    return max(0, math.ceil(q * len(values) - 1e-9) - 1)


def _ranked(values: np.ndarray, ranks: dict[str, int]) -> dict[str, float | None]:
    """The value of each rank of *ranks* in *values* sorted (None past its end), found
    by partitioning *values* in place (a scratch array: its order is lost)."""
    out: dict[str, float | None] = {}
    for key, k in ranks.items():
        if k < values.size:
            values.partition(k)
            out[key] = float(values[k])
        else:
            out[key] = None
    return out


def latency_quantiles(jobs: pd.DataFrame, end: float) -> dict:
    """Each latency quantile of :data:`QUANTILES` over every submitted job, as two exact
    bounds: ``latency_pXX`` with pending jobs at their age (the lower bound, see
    :func:`job_latencies`) and ``latency_pXX_upper`` with pending jobs at +inf (None when
    that makes it infinite: the pending share reaches 1 - q). The quantile is an order
    statistic (one job's latency, no interpolation between two), so the true one lies
    in [lower, upper] and is exact when they meet. Also ``pending_age_max`` (None with
    none pending), ``latency_censored`` (a quantile's bounds differ), and the same
    quantiles over the succeeded jobs alone (``latency_succeeded_pXX``, exact).
    One scratch array of latencies at a time: a long run's summary costs one column."""
    outcome = jobs["outcome"]
    latency = jobs["latency"].to_numpy()  # pending: NaN (their ages go in a scratch copy)
    ranks = {key: order_statistic(latency, q) for key, q in QUANTILES.items()}
    upper = _ranked(latency[(outcome != "pending").to_numpy()], ranks)  # pending at +inf
    every, oldest = job_latencies(jobs, end)
    lower = _ranked(every, ranks)
    del every
    out: dict = {}
    for key in QUANTILES:
        out[key], out[f"{key}_upper"] = lower[key], upper[key]
    out["pending_age_max"] = oldest
    out["latency_censored"] = any(out[key] != out[f"{key}_upper"] for key in QUANTILES
                                  if out[key] is not None)
    succeeded = latency[(outcome == "succeeded").to_numpy()]
    exact = _ranked(succeeded, {key: order_statistic(succeeded, q)
                                for key, q in QUANTILES.items()})
    for key in QUANTILES:
        out[key.replace("latency_", "latency_succeeded_")] = exact[key]
    return out


def offered_rate(scenario: Scenario, start: float, end: float) -> float:
    """Mean rate (jobs/s) of jobs that can succeed offered in [*start*, *end*): the
    workload's rate (or profile), the spikes' rates inside their windows, times
    1 - poison_fraction (a trace's mean rate over the run)."""
    wl = scenario.workload
    if wl.profile:
        return Piecewise(wl).integral(start, end) / (end - start) * (1 - wl.poison_fraction)
    total = wl.rate * (end - start)
    for spike in wl.spikes:
        overlap = min(end, spike.at + spike.duration) - max(start, spike.at)
        total += max(0.0, overlap) * (spike.rate - wl.rate)
    return total / (end - start) * (1 - wl.poison_fraction)


def goodput(jobs: pd.DataFrame, scenario: Scenario) -> float | None:
    """Successes per second from the end of the last outage (the run's start without one)
    to the run's end, over :func:`offered_rate` in that window. Above 1 while a backlog is
    worked off; None for a model that serves no offered load (occ), or with no window
    left."""
    if not downstreams.named(scenario.downstream.model).queueing:
        return None
    start = scenario.last_outage_end or 0.0
    end = scenario.duration
    if end <= start:
        return None
    offered = offered_rate(scenario, start, end)
    if offered <= 0:
        return None
    succeeded = jobs["outcome"] == "succeeded"
    done = int((succeeded & (jobs["finish"] >= start)).sum())
    return done / (end - start) / offered


def bounded_capacity(scenario: Scenario) -> float | None:
    """``capacity_rate``, or None when the downstream is effectively unbounded: a slot
    limit alone (no rate limit, no ``latency_per_call``) above ``UNBOUNDED_FACTOR`` times
    the highest offered rate (``workload.rate``, a spike's, the backlog over the run), so
    no peak can approach it."""
    ds, wl = scenario.downstream, scenario.workload
    capacity = ds.capacity_rate()
    if ds.rate_limit is not None or ds.overload.latency_per_call > 0:
        return capacity
    highest = max([*wl.profile_rates(), wl.backlog / scenario.duration,
                   *(s.rate for s in wl.spikes)])
    return None if capacity > UNBOUNDED_FACTOR * highest else capacity


def peak_to_baseline(attempt_times: np.ndarray, scenario: Scenario) -> float | None:
    """The busiest ``peak_window`` of calls from the first outage's start on, over the
    busiest one before it (None without an outage, or with less than one window before
    it, or no call before it)."""
    first = scenario.first_outage_start
    if first is None:
        return None
    window = scenario.peak_window
    if first < window:
        return None
    times = np.asarray(attempt_times, dtype=float)
    cut = int(np.searchsorted(times, first, side="left"))
    # a window must end before the outage to count as "before": drop calls too close to it
    before = times[:int(np.searchsorted(times, first - window, side="right"))]  # (sorted)
    baseline = peak_rate(before, window) if cut else 0.0
    if baseline == 0:
        return None
    return peak_rate(times[cut:], window) / baseline


def state(summary: Mapping[str, Any], ts: pd.DataFrame, scenario: Scenario,
          kpis: dict | None = None) -> str:
    """``recovered``, ``degraded`` or ``metastable``: the sweep's classifier
    (:mod:`herdsim.analysis.metastability`) on this run. Without an outage the recovery it
    judges is the same health rule from the end of the last load spike, or from t = 0
    (counted as 0 s: nothing to recover from, only whether it is healthy at the end).
    A model with an end of its own (occ: ``completion_time``, broker:
    ``reconnect_time``): recovered when it came or nothing began (a broker none of whose
    connections dropped); else the classifier's rule for a run not recovered: metastable
    when it collapsed after the last outage or served nothing in the tail
    (:func:`stuck`), degraded while still making progress. *kpis* replaces
    :func:`~herdsim.analysis.metastability.frame_kpis` (a call graph's tier: its own load
    and goodput)."""
    done_when = downstreams.named(scenario.downstream.model).done_when
    if done_when is not None:
        if summary.get(done_when) is not None or not summary.get("jobs_submitted"):
            return "recovered"
        return "metastable" if stuck(summary, ts, scenario) else "degraded"
    recovery = summary["recovery_time"]
    if not scenario.all_outages:
        spikes = scenario.workload.spikes
        first = min((spike.at for spike in spikes), default=0.0)
        end = max((spike.at + spike.duration for spike in spikes), default=0.0)
        recovery = settle_time(ts, scenario, first, end)
        if recovery is not None and not spikes:
            recovery = 0.0
    row = {**(kpis or metastability.frame_kpis(ts, scenario)), "recovery_time": recovery,
           "collapses_after_outage": summary["collapses_after_outage"]}
    return str(metastability.classify(pd.DataFrame([row])).iloc[0])


def stuck(summary: Mapping[str, Any], ts: pd.DataFrame, scenario: Scenario) -> bool:
    """A model with an end of its own that did not reach it: did the trigger's end not
    help? It collapsed after the last outage, or nothing succeeded over the run's tail
    (the classifier's tail: :func:`~herdsim.analysis.metastability.tail`)."""
    if summary.get("collapses_after_outage"):
        return True
    return not ts["success"].to_numpy()[metastability.tail(ts, scenario)].sum()

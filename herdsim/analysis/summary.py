"""KPIs from a run's frames: peaks on short windows, recovery, amplification, latency.

Every rule here is documented in ``docs/model.md`` ("What the summary measures").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from herdsim.config.scenario import Scenario

RECOVERY_RATE_WINDOW = 1.0  # s, trailing window of the success-rate check
RECOVERY_GOODPUT = 0.9  # success rate must be back to 90% of its pre-outage level
RECOVERY_BACKLOG_SLACK = 0.5  # s of offered traffic allowed above the pre-outage backlog
PRE_OUTAGE_WINDOW = 10.0  # s before the first outage used as "normal"
STORM_LEVEL = 0.01  # a retry storm lasts while retries exceed 1% of the offered rate


def peak_rate(times: np.ndarray, window: float) -> float:
    """Events per second in the busiest window of width *window* (times sorted)."""
    times = np.asarray(times, dtype=float)
    if times.size == 0:
        return 0.0
    ends = np.searchsorted(times, times + window, side="left")
    return float((ends - np.arange(times.size)).max() / window)


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
    if not scenario.downstream.outages:
        return np.zeros(len(ts), dtype=bool)
    start = min(o.start for o in scenario.downstream.outages)
    times = ts["time"].to_numpy()
    k = max(1, int(round(1.0 / scenario.bin)))
    rate = ts["retry"].rolling(k, min_periods=1).sum().to_numpy() / (k * scenario.bin)
    before = times < start
    baseline = float(rate[before].mean()) if before.any() else 0.0
    return storm_mask(rate, times, start, storm_threshold(scenario, baseline))


def recovery_time(ts: pd.DataFrame, scenario: Scenario) -> float | None:
    """Seconds from the end of the last outage until the run is healthy for good.

    Healthy: the downstream is up, the success rate over the trailing second is at least
    90% of its level in the 10 s before the first outage (or of the offered goodput when
    there is no such period; 3 Poisson standard deviations below it when that is lower),
    and the backlog (main queue + jobs waiting to retry) is
    within half a second of offered traffic of its pre-outage maximum. ``None`` when the
    run has no outage, ends unhealthy, or is healthy for less than its last second.
    """
    outages = scenario.downstream.outages
    if not outages:
        return None
    width = scenario.bin
    first = min(o.start for o in outages)
    end = max(o.end for o in outages)
    times = ts["time"].to_numpy()
    k = max(1, int(round(RECOVERY_RATE_WINDOW / width)))
    success_rate = ts["success"].rolling(k, min_periods=k).sum().to_numpy() / (k * width)
    backlog = (ts["queue_depth"] + ts["delayed"]).to_numpy()
    offered = scenario.workload.rate
    pre = (times >= first - PRE_OUTAGE_WINDOW) & (times < first - width * k)
    if pre.sum() >= k:
        reference = float(np.nanmean(success_rate[pre]))
        backlog_limit = float(backlog[times < first][-k * 10:].max())
    else:
        reference = offered * (1 - scenario.workload.poison_fraction)
        backlog_limit = 0.0
    backlog_limit += RECOVERY_BACKLOG_SLACK * offered
    # 90% of the reference, or 3 Poisson standard deviations below it when that is lower
    # (at low rates a 10% dip over one second is noise, not a relapse).
    expected = reference * k * width
    floor = min(RECOVERY_GOODPUT * expected, expected - 3 * np.sqrt(expected)) / (k * width)
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
    if times[-1] + width - times[first_good] < RECOVERY_RATE_WINDOW:
        return None
    return float(max(0.0, times[first_good] - end))


def job_latencies(jobs: pd.DataFrame, end: float) -> pd.Series:
    """Arrival-to-success times of succeeded jobs, and for jobs still pending their age
    at *end* (a lower bound: a run that stops mid-storm must not look fast because only
    its lucky jobs finished). Dead-lettered jobs never succeed and are left out."""
    outcome = jobs["outcome"]
    pending = outcome == "pending"
    ages = end - jobs.loc[pending, "arrival"]
    return pd.concat([jobs.loc[outcome == "succeeded", "latency"], ages], ignore_index=True)


def summarize(ts: pd.DataFrame, jobs: pd.DataFrame, attempt_times: np.ndarray,
              crash_times: list[float], scenario: Scenario, wall: float,
              breaker_trips: int = 0, breaker_open_time: float = 0.0) -> dict:
    """The KPIs of one run, as a flat dict of plain numbers (None where undefined).

    ``breaker_open_time`` is the mean time one breaker spent not closed (seconds).
    """
    outcome = jobs["outcome"]
    submitted = len(jobs)
    succeeded = int((outcome == "succeeded").sum())
    dead = int((outcome == "dead_lettered").sum())
    capacity = scenario.downstream.capacity_rate()
    peak = peak_rate(attempt_times, scenario.peak_window)
    outages = scenario.outage_windows
    last_end = max((end for _, end in outages), default=None)
    after = [t for t in crash_times if last_end is not None and t >= last_end]
    storm = retry_storm(ts, scenario)
    latency = job_latencies(jobs, scenario.duration)
    attempts_total = int(len(attempt_times))
    return {
        "scenario": scenario.name,
        "strategy": scenario.retry.strategy,
        "seed": scenario.seed,
        "outages": len(outages),
        "jobs_submitted": submitted,
        "jobs_succeeded": succeeded,
        "jobs_dead_lettered": dead,
        "jobs_pending": submitted - succeeded - dead,
        "jobs_refused": int(ts["refused"].sum()),
        "attempts_total": attempts_total,
        "retries_total": int(ts["retry"].sum()),
        "amplification": attempts_total / submitted if submitted else None,
        "rejected_total": int(ts["rejected"].sum()),
        "timeouts_total": int(ts["timeouts"].sum()),
        "errors_total": int(ts["errors"].sum()),
        "wasted_total": int(ts["wasted"].sum()),
        "recycled_total": int(ts["recycled"].sum()),
        "calls_avoided": int(ts["short_circuited"].sum()),
        "budget_refused_total": int(ts["budget_refused"].sum()),
        "breaker_trips": breaker_trips,
        "breaker_open_time": breaker_open_time,
        "capacity_rate": capacity,
        "peak_attempt_rate": peak,
        "peak_to_capacity": peak / capacity,
        "retry_peak_to_mean": peak_over_mean(ts["retry"].to_numpy()[storm]),
        "collapses": len(crash_times),
        "collapses_after_outage": len(after),
        "recovery_time": recovery_time(ts, scenario),
        "latency_p50": float(latency.quantile(0.5)) if len(latency) else None,
        "latency_p99": float(latency.quantile(0.99)) if len(latency) else None,
        "wall_seconds": wall,
        "calls_per_wall_second": attempts_total / wall if wall > 0 else None,
    }

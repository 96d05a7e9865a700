"""Peaks of a fluid: the mean flow's busiest window, corrected for random bunching.

A fluid gives the mean number of calls in a window ending at each step, m = d + r: d
from deterministic cohorts (constant arrivals, fixed or exponential sleeps after one
failure instant, an outage's start or a crash: no correction) and r of random timing
(Poisson arrivals, jittered sleeps, any sleep after a failure at a random instant:
Poisson). The simulation's busiest window slides over the whole run, so its
count is a scan statistic: a level K is crossed at a rate, per second,
(r/w)·((c - r)/c)·p(c - 1; r) with c = K - d the random calls it takes and p the Poisson
probability (Alm 1983, "On the distribution of the scan statistic of a Poisson
process"). The busiest window is the level the run crosses with even odds: expected
crossings ln 2, found by bisection (vectorised over groups of steps: the whole run, or
each bin). The same level decides "near threshold": a crash rule whose threshold the
fluid's mean stays under but bunching reaches is a coin the model cannot call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from herdsim.config.scenario import Scenario


@dataclass(frozen=True)
class Peak:
    """The busiest window: the fluid's ``mean`` count and ``corrected`` for bunching."""

    mean: float
    corrected: float


def busiest(mean: np.ndarray, randomised: np.ndarray, dt: float, width: float,
            groups: int = 1) -> np.ndarray:
    """The busiest window of each of *groups* equal stretches of the steps, with random
    bunching (the module docstring): *mean* and *randomised* are the counts in the
    window of *width* seconds ending at each step."""
    mean = mean[:mean.size // groups * groups].reshape(groups, -1)
    rand = np.maximum(randomised[:mean.size].reshape(groups, -1), 0.0)
    low = mean.max(axis=1)
    high = low + 10.0 * np.sqrt(rand.max(axis=1)) + 20.0
    for _ in range(30):
        level = (low + high) / 2
        crossing = _crossings(mean, rand, level[:, None], dt, width)
        above = crossing > math.log(2.0)
        low = np.where(above, level, low)
        high = np.where(above, high, level)
    return np.where(rand.max(axis=1) > 0, high, mean.max(axis=1))


def _crossings(mean, rand, level, dt, width):
    """Expected up-crossings of *level* by the sliding count (Alm's rate, summed)."""
    need = level - (mean - rand)  # random calls it takes
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = (need - 1) * np.log(rand) - rand - gammaln(np.maximum(need, 1.0))
        rate = rand / width * np.maximum(need - rand, 0.0) / need * np.exp(log_p)
    rate = np.where((rand > 0) & (need > 1), rate, 0.0)
    return np.where((mean >= level).any(axis=1), np.inf, rate.sum(axis=1) * dt)


def sliding(values: np.ndarray, width: int) -> np.ndarray:
    """Sums over every *width* consecutive steps ending at each step."""
    total = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, values.size + 1)
    return total[ends] - total[np.maximum(ends - width, 0)]


def peak(attempts: np.ndarray, randomised: np.ndarray, scenario: Scenario, dt: float
         ) -> Peak:
    """The busiest ``peak_window`` of calls over the run."""
    width = max(1, int(round(scenario.peak_window / dt)))
    mean = sliding(attempts, width)
    corrected = busiest(mean, sliding(randomised, width), dt, scenario.peak_window)
    return Peak(float(mean.max(initial=0.0)), float(corrected[0]))


def per_bin(attempts: np.ndarray, randomised: np.ndarray, scenario: Scenario, dt: float
            ):
    """``time``, ``peak_rate``: each bin's busiest corrected window, in calls/s (the
    frame ``peak_rate.csv`` holds for a run)."""
    import pandas as pd

    width = max(1, int(round(scenario.peak_window / dt)))
    per = int(round(scenario.bin / dt))
    n_bins = attempts.size // per
    most = busiest(sliding(attempts, width)[:n_bins * per],
                   sliding(randomised, width)[:n_bins * per], dt, scenario.peak_window, n_bins)
    return pd.DataFrame({"time": np.arange(n_bins) * scenario.bin,
                         "peak_rate": most / scenario.peak_window})


def near_threshold(flows, scenario: Scenario, dt: float) -> str | None:
    """Why the crash rule is within reach of random bunching, or None: the fluid's
    busiest collapse window (while up, no crash) m below the threshold and m + z·sqrt(r)
    at or above it."""
    collapse = scenario.downstream.overload.collapse
    if collapse is None or collapse.threshold is None:
        return None
    width = max(1, int(round(collapse.window / dt)))
    load = flows.collapse_load
    crashes = np.flatnonzero(flows.crashes)
    since = int(crashes[-1]) + 1 if crashes.size else 0  # what decides the ending
    if since >= load.size:
        return None
    load = load[since:]
    reach = float(busiest(load, sliding(flows.randomised, width)[since:], dt,
                          collapse.window)[0])
    if reach <= collapse.threshold or load.max() > collapse.threshold:
        return None
    return (f"the busiest {collapse.window * 1000:g} ms after the last crash holds "
            f"{load.max():,.0f} calls (mean); random bunching reaches {reach:,.0f}, over "
            f"the threshold {collapse.threshold:,}")

"""Peaks of a fluid: the mean flow's busiest window, corrected for random bunching.

A fluid gives the mean number of calls in a window ending at each step, m = d + r: d
from deterministic cohorts (constant arrivals, fixed or exponential sleeps after one
failure instant, an outage's start or a crash: no correction) and r of random timing
(Poisson arrivals, jittered sleeps, any sleep after a failure at a random instant:
Poisson). The simulation's busiest window slides over the whole run, so its
count is a scan statistic: a level K is crossed at a rate, per second,
(r/w)·((c - r)/c)·p(c - 1; r) with c = K - d the random calls it takes and p the Poisson
probability (Alm 1983, "On the distribution of the scan statistic of a Poisson
process"), and the window may start over it: Alm's approximation counts expected
exceedances E = -ln(1 - P0) + the summed crossings, P0 the most likely single window's
P(Poisson(r) >= c), and the level exceeded with chance p is where E = -ln(1 - p) (found
by bisection, vectorised over groups of steps: the whole run, or each bin). The busiest
window is the even-odds level by the crossings alone (:func:`busiest`); "near threshold"
is the 5% level with both terms: a crash rule whose threshold the fluid's mean stays
under but bunching exceeds one run in twenty is a coin the model cannot call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincc, gammaln

from herdsim.config.scenario import Scenario

TINY = 1e-12
NEAR = 0.05  # the chance of a crash that makes a threshold "near" (near_threshold)


@dataclass(frozen=True)
class Peak:
    """The busiest window: the fluid's ``mean`` count and ``corrected`` for bunching."""

    mean: float
    corrected: float


def busiest(mean: np.ndarray, randomised: np.ndarray, dt: float, width: float,
            groups: int = 1) -> np.ndarray:
    """The busiest window of each of *groups* equal stretches of the steps, with random
    bunching (the module docstring): *mean* and *randomised* are the counts in the
    window of *width* seconds ending at each step. The level crossed with even odds, by
    the up-crossings alone: the chance that a window already starts over it is left
    out (adding it raised the peaks by up to 1.5% and agreed with the simulation no
    better: docs/validation.md §7)."""
    return level_for(mean, randomised, dt, width, 0.5, groups, initial=False)


def level_for(mean: np.ndarray, randomised: np.ndarray, dt: float, width: float,
              chance: float, groups: int = 1, initial: bool = True) -> np.ndarray:
    """The level the sliding count of each of *groups* stretches exceeds with *chance*:
    expected exceedances (:func:`exceedances`, with its *initial* term or not) of
    -ln(1 - chance), by bisection."""
    mean = mean[:mean.size // groups * groups].reshape(groups, -1)
    rand = np.maximum(randomised[:mean.size].reshape(groups, -1), 0.0)
    target = -math.log1p(-chance)
    low = mean.max(axis=1)
    high = low + 10.0 * np.sqrt(rand.max(axis=1)) + 20.0
    for _ in range(30):
        level = (low + high) / 2
        above = exceedances(mean, rand, level[:, None], dt, width, initial) > target
        low = np.where(above, level, low)
        high = np.where(above, high, level)
    return np.where(rand.max(axis=1) > 0, high, mean.max(axis=1))


def exceedances(mean, rand, level, dt, width, initial=True):
    """Expected exceedances of *level* per row (Alm 1983): the up-crossings summed over
    the steps plus, if *initial*, -ln(1 - P0), P0 the most likely single window's
    P(Poisson(r) >= c) (a window already over the level: near the mean, where the
    up-crossing rate's factor (c - r)/c vanishes, this term is most of the answer)."""
    need = level - (mean - rand)  # random calls it takes
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = (need - 1) * np.log(rand) - rand - gammaln(np.maximum(need, 1.0))
        rate = rand / width * np.maximum(need - rand, 0.0) / need * np.exp(log_p)
    rate = np.where((rand > 0) & (need > 1), rate, 0.0)
    start = 0.0
    if initial:
        below = gammaincc(np.maximum(need, TINY), rand)  # P(Poisson(r) < c), c real
        with np.errstate(divide="ignore"):
            start = -np.log(np.where(rand > 0, below, 1.0).min(axis=1))
    return np.where((mean >= level).any(axis=1), np.inf, start + rate.sum(axis=1) * dt)


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
    busiest collapse window (while up, after the last crash) m stays below the
    threshold, and the level its random bunching exceeds with a 5% chance (NEAR) is at
    or above it. 5%, not even odds: a crash the herd causes one run in twenty already
    changes the ending of that run (a crash rule's trip is not undone), and a mean below
    the threshold with a 5% reach over it is a state no mean field can claim; far from
    the threshold the 5% level sits a few standard deviations of the Poisson count above
    the mean, so a clearly recovered or collapsed run is not flagged."""
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
    reach = float(level_for(load, sliding(flows.randomised, width)[since:], dt,
                            collapse.window, NEAR)[0])
    if reach < collapse.threshold or load.max() > collapse.threshold:
        return None
    after = " after the last crash" if crashes.size else ""
    return (f"the busiest {collapse.window * 1000:g} ms{after} holds "
            f"{load.max():,.0f} calls (fluid mean); random bunching exceeds {reach:,.0f} "
            f"with a {NEAR:.0%} chance, at or over the threshold {collapse.threshold:,}")

"""Peaks of a fluid: the mean flow's busiest window, corrected for random bunching.

A fluid gives the mean number of calls in a window, m. The simulation's busiest of n
windows is the largest of n draws around it: for the part of m whose timing is random
(Poisson arrivals, jittered sleeps: r of the m calls, Poisson-like, variance r) it lies
about z standard deviations above, z the normal quantile 1 - 1/n (the Gumbel location of
the maximum of n normal draws); a deterministic cohort (fixed or exponential sleeps after
one failure instant, constant arrivals) gets no correction. So the busiest window is
max(m + z·sqrt(r)). The same band decides "near threshold": a crash rule whose threshold
lies within reach of random bunching (the fluid's window below it, its corrected window
above) is a coin the model cannot call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from herdsim.config.scenario import Scenario


@dataclass(frozen=True)
class Peak:
    """The busiest window: the fluid's ``mean`` count, ``corrected`` for bunching, and
    the ``z`` used (standard deviations above the mean)."""

    mean: float
    corrected: float
    z: float


def z_for(windows: float) -> float:
    """Standard deviations the largest of *windows* normal draws lies above their mean
    (the normal quantile 1 - 1/n; 0 for one window)."""
    return float(norm.isf(1.0 / windows)) if windows > 1 else 0.0


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
    z = z_for(scenario.duration / scenario.peak_window)
    corrected = mean + z * np.sqrt(sliding(randomised, width))
    return Peak(float(mean.max(initial=0.0)), float(corrected.max(initial=0.0)), z)


def per_bin(attempts: np.ndarray, randomised: np.ndarray, scenario: Scenario, dt: float
            ):
    """``time``, ``peak_rate``: each bin's busiest corrected window, in calls/s (the
    frame ``peak_rate.csv`` holds for a run)."""
    import pandas as pd

    width = max(1, int(round(scenario.peak_window / dt)))
    per = int(round(scenario.bin / dt))
    n_bins = attempts.size // per
    z = z_for(scenario.bin / scenario.peak_window)
    corrected = sliding(attempts, width) + z * np.sqrt(sliding(randomised, width))
    most = corrected[:n_bins * per].reshape(n_bins, per).max(axis=1)
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
    spread = np.sqrt(sliding(flows.randomised, width))
    z = z_for(scenario.duration / collapse.window)
    quiet = flows.crashes == 0
    reach = np.where(quiet, load + z * spread, 0.0)
    i = int(np.argmax(reach))
    if reach[i] < collapse.threshold or load[i] >= collapse.threshold:
        return None
    return (f"busiest {collapse.window * 1000:g} ms holds {load[i]:,.0f} calls (mean) at "
            f"t = {i * dt:.1f} s; random bunching (+{z:.1f} sd = {z * spread[i]:,.0f}) "
            f"reaches the threshold {collapse.threshold:,}")

"""Uncertainty of a figure over replications: the t interval of a mean, Wilson's of a
fraction. One formula each, used by every table, figure and report."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def ci95(values: Sequence[float] | np.ndarray) -> float:
    """Half-width of the 95% Student-t confidence interval of the mean over *values*
    (NaN below 2 values; missing values are left out of the spread, not of n)."""
    from scipy import stats  # slow to import: only when a spread is asked for

    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2 or np.isnan(values).all():
        return float("nan")
    return float(stats.t.ppf(0.975, n - 1) * np.nanstd(values, ddof=1) / math.sqrt(n))


def wilson95(successes: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval ``(low, high)`` of a fraction *successes* / *n*."""
    from scipy import stats

    if n == 0:
        return (0.0, 1.0)
    z = float(stats.norm.ppf(0.975))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))

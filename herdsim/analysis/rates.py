"""Peak rates on short windows: the busiest window starting within each bin."""

from __future__ import annotations

import numpy as np


def peak_rate_series(times: np.ndarray, window: float, bin_width: float,
                     n_bins: int) -> np.ndarray:
    """Per bin: events per second in the busiest *window* starting within the bin.

    *times* must be sorted. The maximum over bins is ``analysis.peak_rate(times, window)``.
    """
    times = np.asarray(times, dtype=float)
    out = np.zeros(n_bins)
    if times.size == 0:
        return out
    rate = (np.searchsorted(times, times + window, side="left") - np.arange(times.size)) / window
    index = np.clip((times / bin_width).astype(np.int64), 0, n_bins - 1)
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    out[index[starts]] = np.maximum.reduceat(rate, starts)
    return out

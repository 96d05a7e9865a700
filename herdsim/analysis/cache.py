"""A cache's numbers from the time series: its hit rate per bin and over windows, and
how long it takes to refill after a flush.

A cache in front of the workers' downstream adds the columns ``cache_hits`` and
``cache_misses`` (and ``cache_coalesced``, ``cache_stale`` with those options); one in
front of a graph's service ``<service>_cache_hits`` … (:mod:`herdsim.analysis.tiers`).
The hit rate is hits over requests (a stale hit is a hit, a coalesced miss a miss).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from herdsim.analysis.metastability import TAIL_FRACTION

REFILLED = 0.9  # refilled: the hit rate back to 90% of its pre-flush value
HIT, MISS = "cache_hits", "cache_misses"


def has_cache(ts: pd.DataFrame, prefix: str = "") -> bool:
    """Whether *ts* holds a cache's columns (``prefix``: ``<service>_`` for a tier)."""
    return prefix + HIT in ts.columns


def hit_rate(hits: np.ndarray, misses: np.ndarray) -> np.ndarray:
    """Hits over requests per bin (NaN in a bin without requests)."""
    total = hits + misses
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, hits / np.maximum(total, 1), np.nan)


def overall(ts: pd.DataFrame, since: float = 0.0, prefix: str = "") -> float | None:
    """The hit rate over the bins from *since* on (None without requests)."""
    rows = ts["time"].to_numpy() >= since
    hits = float(ts[prefix + HIT].to_numpy()[rows].sum())
    total = hits + float(ts[prefix + MISS].to_numpy()[rows].sum())
    return hits / total if total else None


def tail_rate(ts: pd.DataFrame, duration: float, prefix: str = "") -> float | None:
    """The hit rate over the run's tail (its last 10%, as the metastability classes)."""
    return overall(ts, duration * (1 - TAIL_FRACTION), prefix)


def refill_time(starts: np.ndarray, ends: np.ndarray, hits: np.ndarray,
                misses: np.ndarray, flush: float, pre_end: float | None = None
                ) -> float | None:
    """Seconds from *flush* to the end of the first bin (``starts[i]`` to ``ends[i]``)
    starting at or after it whose hit rate is back to :data:`REFILLED` of the rate over
    the bins ending by *pre_end* (default: the flush); None when none is (not within the
    run) or no bin before had requests."""
    before = ends <= (flush if pre_end is None else pre_end) + 1e-9
    pre_total = hits[before].sum() + misses[before].sum()
    if not pre_total:
        return None
    target = REFILLED * hits[before].sum() / pre_total
    rate = hit_rate(hits, misses)
    after = np.flatnonzero((starts >= flush - 1e-9) & (rate >= target))
    return float(ends[after[0]] - flush) if after.size else None


def flush_refill(ts: pd.DataFrame, flush: float | None, width: float,
                 prefix: str = "", pre_end: float | None = None) -> float | None:
    """:func:`refill_time` over *ts*'s bins of *width* (None without a flush)."""
    if flush is None:
        return None
    times = ts["time"].to_numpy()
    return refill_time(times, times + width, ts[prefix + HIT].to_numpy(),
                       ts[prefix + MISS].to_numpy(), flush, pre_end)

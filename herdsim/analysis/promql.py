"""PromQL's ``rate()`` in pandas, with Prometheus's own extrapolation rules.

``rate(samples, "10s")`` returns what ``rate(metric[10s])`` returns for one series, so a
notebook plots exactly the curve Grafana draws. ``sum(rate(...)) by (queue)`` is a plain
sum of such series. The rules (Prometheus ``promql/functions.go``, ``extrapolatedRate``):

* the window ending at evaluation time *t* holds the samples in ``(t - w, t]``
  (Prometheus >= 3; ``[t - w, t]`` before 3.0: pass ``left_open=False``);
  fewer than two samples: no value;
* the increase is ``last - first``, plus every value seen just before a counter reset;
* it is extrapolated towards each window edge by the gap to that edge when the gap is
  under 1.1 x the average sample interval, else by half an average interval (the series
  is taken to start or end there);
* a counter is never extrapolated back past the point where it would read zero (this
  clamp applies after the half-interval rule, as since prometheus/prometheus#13725);
* the result is divided by the window width in seconds.

Timestamps are handled in integer milliseconds, as Prometheus stores them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from herdsim.policies.durations import parse_duration

EXTRAPOLATION_THRESHOLD = 1.1  # x the average sample interval


def to_millis(seconds: np.ndarray | pd.Index | float) -> np.ndarray:
    """Seconds -> integer milliseconds (rounded), the resolution Prometheus stores."""
    return np.round(np.asarray(seconds, dtype=float) * 1000).astype(np.int64)


def evaluation_times(start: float, end: float, step: float) -> np.ndarray:
    """The instants ``query_range`` evaluates at: ``start, start + step, ... <= end`` (s)."""
    start_ms, end_ms, step_ms = to_millis(start), to_millis(end), to_millis(step)
    if step_ms <= 0:
        raise ValueError(f"step must be at least 1ms, got {step!r}")
    return np.arange(int(start_ms), int(end_ms) + 1, int(step_ms)) / 1000


def rate(samples: pd.Series, window: str | float = "10s", step: str | float | None = None,
         start: float | None = None, end: float | None = None,
         left_open: bool = True) -> pd.Series:
    """Per-second rate of the counter *samples* (values indexed by time in seconds).

    Evaluated like ``query_range``: from *start* (default: the first sample) to *end*
    (default: the last) every *step* (default: at every sample time). Returns a series
    indexed by evaluation time; NaN where the window holds fewer than two samples.
    """
    width = to_millis(parse_duration(window))
    if width <= 0:
        raise ValueError(f"window must be at least 1ms, got {window!r}")
    samples = samples.sort_index()
    times = to_millis(samples.index.to_numpy(dtype=float))
    if np.any(np.diff(times) == 0):
        raise ValueError("two samples share a timestamp (at millisecond resolution)")
    values = samples.to_numpy(dtype=float)
    if times.size == 0 and (start is None or end is None):
        return pd.Series([], index=pd.Index([], name="time"), name="rate", dtype=float)
    first = times[0] / 1000 if start is None else start
    last = times[-1] / 1000 if end is None else end
    if step is None:
        evals = times[(times >= to_millis(first)) & (times <= to_millis(last))]
    else:
        evals = to_millis(evaluation_times(first, last, parse_duration(step)))
    return pd.Series(_extrapolated_rate(times, values, evals, width, left_open),
                     index=pd.Index(evals / 1000, name="time"), name="rate")


def _extrapolated_rate(times: np.ndarray, values: np.ndarray, evals: np.ndarray,
                       width: int | np.ndarray, left_open: bool) -> np.ndarray:
    """Vectorised ``extrapolatedRate(isCounter=True, isRate=True)`` at each of *evals*."""
    range_start = evals - width
    lo = np.searchsorted(times, range_start, side="right" if left_open else "left")
    hi = np.searchsorted(times, evals, side="right") - 1  # last sample in the window
    ok = hi - lo >= 1
    lo, hi = lo[ok], hi[ok]
    # value lost at each reset, accumulated: the increase over [lo, hi] gains what was lost
    drops = np.concatenate([[0.0], np.where(values[1:] < values[:-1], values[:-1], 0.0)])
    lost = np.cumsum(drops)
    first = values[lo]
    increase = values[hi] - first + lost[hi] - lost[lo]

    to_start = (times[lo] - range_start[ok]) / 1000
    to_end = (evals[ok] - times[hi]) / 1000
    sampled = (times[hi] - times[lo]) / 1000
    average = sampled / (hi - lo)
    threshold = EXTRAPOLATION_THRESHOLD * average
    to_start = np.where(to_start >= threshold, average / 2, to_start)
    to_end = np.where(to_end >= threshold, average / 2, to_end)
    clamp = (increase > 0) & (first >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        to_zero = np.where(clamp, sampled * first / np.where(clamp, increase, 1.0), np.inf)
    to_start = np.minimum(to_start, to_zero)

    out = np.full(evals.shape, np.nan)
    out[ok] = increase * (sampled + to_start + to_end) / sampled / (width / 1000)
    return out

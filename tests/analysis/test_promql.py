"""``herdsim.analysis.promql.rate`` against Prometheus's documented ``rate()`` semantics.

Hand-computed cases pin each rule of ``extrapolatedRate`` (promql/functions.go): the
window's boundary, extrapolation to the edges, the 1.1 x average-interval threshold with its
half-interval fallback, counter resets, the zero clamp. Properties check the vectorised code
against a line-by-line scalar transcription of the same rules. Budget: about 2 s.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herdsim.analysis.promql import evaluation_times, rate


def counter(times, values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=float), index=np.asarray(times, dtype=float))


def at(samples: pd.Series, t: float, window: str = "10s", left_open: bool = True) -> float:
    return float(rate(samples, window, step="1s", start=t, end=t, left_open=left_open).iloc[0])


def test_linear_counter_fully_covered_reads_its_slope():
    """0, 1, ..., 10 at 1 s: 1/s whichever way the left edge is treated (closed: 11 samples,
    no extrapolation; open: 10 samples, extrapolated 1 s back to the edge)."""
    samples = counter(range(11), range(11))
    assert at(samples, 10, left_open=False) == pytest.approx(1.0)
    assert at(samples, 10, left_open=True) == pytest.approx(1.0)


def test_series_starting_inside_the_window_extrapolates_half_an_interval():
    """Samples 1..6 at t=5..10, window (0, 10]: the gap to the left edge (5 s) exceeds
    1.1 x the 1 s interval, so the series is taken to start 0.5 s before its first sample;
    the zero point (1 s back) is farther. Increase 5 over 5 s, extrapolated to 5.5 s:
    5.5 / 10 s."""
    samples = counter(range(5, 11), range(1, 7))
    assert at(samples, 10) == pytest.approx(0.55)


def test_series_ending_inside_the_window_extrapolates_half_an_interval():
    """Samples 10..15 at t=0..5, evaluated at t=10: 5 s after the last sample is past the
    threshold, so only 0.5 s is added at the end (the start edge is 0 s away but the zero
    point is 10 s back): 5 x 5.5 / 5 / 10."""
    samples = counter(range(6), range(10, 16))
    assert at(samples, 10, left_open=False) == pytest.approx(0.55)


def test_extrapolation_never_goes_below_zero():
    """Samples 0.2..5.2 at t=5..10: half an interval back (0.5 s) would reach -0.3, so the
    start is clamped at the zero point, 0.2 s back: 5 x 5.2 / 5 / 10."""
    samples = counter(range(5, 11), np.arange(6) + 0.2)
    assert at(samples, 10) == pytest.approx(0.52)


def test_zero_clamp_applies_after_the_threshold_rule():
    """Samples 0.8..5.8 at t=5..10: the zero point (0.8 s back) is beyond the half-interval
    start (0.5 s back), so 0.5 s it is: 0.55 (prometheus/prometheus#13725; Prometheus
    before that fix compared the zero point with the 5 s gap and extrapolated 0.8 s)."""
    samples = counter(range(5, 11), np.arange(6) + 0.8)
    assert at(samples, 10) == pytest.approx(0.55)


def test_counter_reset_adds_the_value_before_the_drop():
    """0..5 then a reset to 0 and 0..4 again at t=0..10: increase 4 - 0 + 5 = 9 over the
    fully covered window (closed at the left, the first sample is on the edge): 0.9/s."""
    samples = counter(range(11), [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4])
    assert at(samples, 10, left_open=False) == pytest.approx(0.9)


def test_left_edge_open_since_prometheus_3():
    """A sample exactly on the left edge is in [t-w, t] (Prometheus 2) but not in (t-w, t]
    (Prometheus 3). 0 at t=0 then 10..19 at t=1..10: closed sees 19 over 10 s; open sees 9
    over 9 s extrapolated 1 s back (zero point 10 s back): 10 / 10 s."""
    samples = counter(range(11), [0, *range(10, 20)])
    assert at(samples, 10, left_open=False) == pytest.approx(1.9)
    assert at(samples, 10, left_open=True) == pytest.approx(1.0)


@pytest.mark.parametrize("window, expected", [
    ("3090ms", 1.0),  # 1.09 s gap < 1.1 x 1 s: extrapolate all the way: slope 1
    ("3200ms", 2.5 / 3.2),  # 1.2 s gap: only 0.5 s back: increase 2 x 2.5 / 2
])
def test_the_threshold_is_1_1_average_intervals(window, expected):
    """Samples 10, 11, 12 at t=10, 11, 12, evaluated at 12."""
    samples = counter([10, 11, 12], [10, 11, 12])
    assert at(samples, 12, window) == pytest.approx(expected)


def test_fewer_than_two_samples_give_no_value():
    samples = counter([0, 20], [0, 5])
    got = rate(samples, "10s", step="5s", start=0, end=20)
    assert got.isna().tolist() == [True, True, True, True, True]


def test_evaluation_grid_matches_query_range():
    """query_range evaluates at start, start + step, ... up to and including end."""
    assert evaluation_times(1.0, 2.0, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75, 2.0]
    assert evaluation_times(1.0, 1.9, 0.5).tolist() == [1.0, 1.5]
    samples = counter(np.arange(0, 5, 0.1), np.arange(50))
    assert rate(samples, "1s").index.tolist() == pytest.approx(list(np.arange(50) / 10))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="share a timestamp"):
        rate(counter([1, 1.0001, 2], [0, 1, 2]), "10s")
    with pytest.raises(ValueError, match="duration"):
        rate(counter([1, 2], [0, 1]), "ten seconds")


def scalar_rate(times_ms, values, t_ms, width_ms, left_open):
    """One evaluation, written the way promql/functions.go reads (current upstream)."""
    def inside(t):
        after_start = t > t_ms - width_ms if left_open else t >= t_ms - width_ms
        return after_start and t <= t_ms

    points = [(t, v) for t, v in zip(times_ms, values, strict=True) if inside(t)]
    if len(points) < 2:
        return math.nan
    result = points[-1][1] - points[0][1]
    last = 0.0
    for _, v in points:
        if v < last:
            result += last
        last = v
    to_start = (points[0][0] - (t_ms - width_ms)) / 1000
    to_end = (t_ms - points[-1][0]) / 1000
    sampled = (points[-1][0] - points[0][0]) / 1000
    average = sampled / (len(points) - 1)
    threshold = average * 1.1
    if to_start >= threshold:
        to_start = average / 2
    if result > 0 and points[0][1] >= 0:
        to_start = min(to_start, sampled * (points[0][1] / result))
    if to_end >= threshold:
        to_end = average / 2
    return result * (sampled + to_start + to_end) / sampled / (width_ms / 1000)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 3000), min_size=1, max_size=40),
    steps=st.lists(st.floats(0, 50, allow_nan=False), min_size=41, max_size=41),
    resets=st.lists(st.booleans(), min_size=41, max_size=41),  # one per time: gaps + 1
    width=st.integers(100, 20000),
    left_open=st.booleans(),
)
def test_vectorised_rate_equals_the_scalar_rules(gaps, steps, resets, width, left_open):
    """Irregular timestamps, resets anywhere, any window: same numbers as the transcription."""
    times = np.cumsum([0, *gaps])
    values, level = [], 0.0
    for i in range(len(times)):
        level = steps[i] if resets[i] else level + steps[i]
        values.append(level)
    samples = counter(times / 1000, values)
    evals = np.arange(times[0] - 1000, times[-1] + width + 1000, 250)
    got = rate(samples, f"{width}ms", step="250ms", start=evals[0] / 1000,
               end=evals[-1] / 1000, left_open=left_open)
    want = [scalar_rate(times, values, t, width, left_open) for t in evals]
    assert np.allclose(got.to_numpy(), want, rtol=1e-12, atol=1e-12, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(slope=st.floats(0.01, 1e5), interval=st.sampled_from([0.01, 0.1, 0.25, 1.0]),
       window_intervals=st.integers(2, 200), offset=st.floats(0, 1e6))
def test_a_linear_counter_reads_its_slope_wherever_the_window_is_covered(
        slope, interval, window_intervals, offset):
    """With samples at a fixed interval and a window that lies within them, extrapolation to
    the edges is exact for a straight line: rate() is the slope."""
    n = window_intervals * 3
    times = np.arange(n) * interval
    samples = counter(times, offset + slope * times)
    window = window_intervals * interval
    got = rate(samples, f"{window * 1000:.0f}ms", left_open=True).to_numpy()
    covered = times >= window + interval
    assert np.allclose(got[covered], slope, rtol=1e-9)

"""Sliding windows against brute-force counts over the raw events.

``TimeWindow(W)`` keeps 20 buckets of width w = W/20: at time t it sums the events whose
bucket (⌊time/w⌋) is one of the last 20, i.e. the events in [(⌊t/w⌋ − 19)·w, t]. That
interval contains (t − W + w, t] and lies inside (t − W, t]: the window is exact to within
one bucket's resolution, w = W/20. The tests check both the bracket (what the docs
promise) and the bucket rule itself. Times and widths are multiples of 1/64 s so that
⌊time/w⌋ is computed without rounding and the bucket rule can be checked exactly.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from herdsim.policies.windows import TIME_BUCKETS, CountWindow, TimeWindow

ticks = st.integers(0, 64 * 200)  # times in 1/64 s, up to 200 s
windows = st.sampled_from([1.25, 2.5, 10.0, 20.0, 40.0])  # w = W/20 is a multiple of 1/64


def brute(events, lo, hi, closed_lo):
    """Sums of the values of events with lo < time <= hi (lo <= time when closed_lo)."""
    total = [0, 0]
    for time, values in events:
        if (lo <= time if closed_lo else lo < time) and time <= hi:
            total[0] += values[0]
            total[1] += values[1]
    return total


@settings(max_examples=200, deadline=None)
@given(window=windows, script=st.lists(
    st.tuples(ticks, st.booleans(), st.integers(0, 3), st.integers(0, 3)), max_size=120))
def test_time_window_totals_match_a_brute_force_count(window, script):
    """At every step (a record or a bare ``advance``) the totals lie between the counts over
    the last W − w and the last W seconds, and equal the count over the last 20 buckets."""
    tw = TimeWindow(window, 2)
    w = window / TIME_BUCKETS
    events: list[tuple[float, tuple[int, int]]] = []
    for tick, is_record, a, b in sorted(script):
        now = tick / 64
        if is_record:
            tw.record(now, (a, b))
            events.append((now, (a, b)))
        totals = list(tw.advance(now))
        inner = brute(events, now - window + w, now, closed_lo=False)
        outer = brute(events, now - window, now, closed_lo=False)
        assert all(i <= x <= o for i, x, o in zip(inner, totals, outer, strict=True))
        first_bucket = (math.floor(now / w) - (TIME_BUCKETS - 1)) * w
        assert totals == brute(events, first_bucket, now, closed_lo=True)


def test_time_window_empties_after_a_long_silence():
    tw = TimeWindow(10.0, 1)
    tw.record(3.0, (5,))
    assert tw.advance(12.9) == [5]  # bucket 6 of width 0.5 is still among the last 20
    assert tw.advance(13.0) == [0]
    tw.record(500.0, (2,))
    assert tw.advance(500.0) == [2]


def test_clear_forgets_everything():
    tw, cw = TimeWindow(10.0, 2), CountWindow(3, 2)
    for window in (tw, cw):
        window.record(1.0, (1, 2))
        window.clear()
        assert window.advance(1.0) == [0, 0]
        window.record(1.5, (1, 0))
        assert window.advance(1.5) == [1, 0]


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 20),
       values=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), max_size=100))
def test_count_window_sums_exactly_the_last_size_calls(size, values):
    cw = CountWindow(size, 2)
    for n, value in enumerate(values, start=1):
        cw.record(float(n), value)
        last = values[max(0, n - size):n]
        assert cw.totals == [sum(v[0] for v in last), sum(v[1] for v in last)]

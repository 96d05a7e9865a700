"""Netflix concurrency-limits' ``WindowedLimit`` (``limit/WindowedLimit.java``) with its
default ``ImmutableAverageSampleWindow``: samples are gathered until a window ends, then
the delegate sees one sample (the mean rtt, the largest inflight, whether any dropped).

A sample whose call ended after ``next_update`` closes the window; the next window ends
``clamp(2 × min rtt, min_window, max_window)`` later (1 s with the defaults). A window
with fewer than ``window_size`` (10) samples is thrown away. Samples under
``min_rtt_threshold`` (100 µs) are ignored.
"""

from __future__ import annotations

from herdsim.policies.limiters.base import Limit, Limiter


class WindowedLimit:
    """Feed *delegate* (anything with ``on_sample`` and ``limit``) once per window."""

    def __init__(self, delegate: Limit, min_window: float = 1.0, max_window: float = 1.0,
                 window_size: int = 10, min_rtt_threshold: float = 100e-6):
        self.delegate = delegate
        self.min_window, self.max_window = min_window, max_window
        self.window_size, self.min_rtt_threshold = window_size, min_rtt_threshold
        self.next_update = 0.0
        self._clear()

    def _clear(self) -> None:
        self.min_rtt, self.total, self.max_inflight, self.count, self.dropped = (
            float("inf"), 0.0, 0, 0, False)

    @property
    def limit(self) -> int:
        return self.delegate.limit

    def limit_at(self, now: float) -> int:
        return self.delegate.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        self.on_sample(start, now - start, inflight, dropped)

    def on_sample(self, start: float, rtt: float, inflight: int, dropped: bool) -> None:
        end = start + rtt
        if rtt < self.min_rtt_threshold:
            return
        self.min_rtt = min(self.min_rtt, rtt)
        self.total += rtt
        self.max_inflight = max(self.max_inflight, inflight)
        self.count += 1
        self.dropped = self.dropped or dropped
        if end > self.next_update:
            min_rtt, count = self.min_rtt, self.count
            mean, max_inflight, any_drop = self.total / count, self.max_inflight, self.dropped
            self._clear()
            self.next_update = end + min(max(min_rtt * 2, self.min_window), self.max_window)
            if count >= self.window_size:
                self.delegate.on_sample(start, mean, max_inflight, any_drop)


def windowed(limit: Limit, wrap: bool) -> Limiter:
    """*limit* in a :class:`WindowedLimit` when *wrap*, else as it is."""
    return WindowedLimit(limit) if wrap else limit

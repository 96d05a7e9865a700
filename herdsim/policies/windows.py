"""Sliding windows of counts, by time (bucketed) or by number of calls.

Used by the circuit breaker (failures, slow calls), the adaptive throttle (requests,
accepts) and the ratio budget (requests, retries). Pure Python, no SimPy.
"""

from __future__ import annotations

from collections import deque

TIME_BUCKETS = 20  # a time window of w seconds is kept as 20 buckets of w/20


class TimeWindow:
    """Sums of ``k`` counters over the last ``window`` seconds (bucket resolution w/20)."""

    __slots__ = ("width", "buckets", "totals", "head")

    def __init__(self, window: float, k: int):
        self.width = window / TIME_BUCKETS
        self.buckets = [[0] * k for _ in range(TIME_BUCKETS)]
        self.totals = [0] * k
        self.head = 0

    def advance(self, now: float) -> list:
        """Expire buckets older than the window; return the running totals."""
        index = int(now / self.width)
        if index != self.head:
            totals = self.totals
            stale = min(index - self.head, TIME_BUCKETS)
            for step in range(1, stale + 1):
                bucket = self.buckets[(self.head + step) % TIME_BUCKETS]
                for j, value in enumerate(bucket):
                    if value:
                        totals[j] -= value
                        bucket[j] = 0
            self.head = index
        return self.totals

    def record(self, now: float, values: tuple) -> None:
        """Add counters at time *now*."""
        self.advance(now)
        bucket, totals = self.buckets[self.head % TIME_BUCKETS], self.totals
        for j, value in enumerate(values):
            bucket[j] += value
            totals[j] += value

    def clear(self) -> None:
        for bucket in self.buckets:
            bucket[:] = [0] * len(bucket)
        self.totals[:] = [0] * len(self.totals)


class CountWindow:
    """Sums of ``k`` counters over the last ``size`` recorded calls."""

    __slots__ = ("size", "entries", "totals")

    def __init__(self, size: int, k: int):
        self.size = size
        self.entries: deque[tuple] = deque()
        self.totals = [0] * k

    def advance(self, now: float) -> list:
        return self.totals

    def record(self, now: float, values: tuple) -> None:
        """Add one call's counters, dropping the oldest call when full."""
        entries, totals = self.entries, self.totals
        if len(entries) == self.size:
            for j, value in enumerate(entries.popleft()):
                totals[j] -= value
        entries.append(values)
        for j, value in enumerate(values):
            totals[j] += value

    def clear(self) -> None:
        self.entries.clear()
        self.totals[:] = [0] * len(self.totals)

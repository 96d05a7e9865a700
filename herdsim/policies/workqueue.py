"""client-go's workqueue: the default controller rate limiter and the queue's dedup rules,
as pure objects with the clock passed in (kubernetes/client-go @v0.36.3, the same text at
master @32ce75a7: ``util/workqueue/default_rate_limiters.go``, ``queue.go``,
``delaying_queue.go``; docs/policies.md cites the lines). The simulated main queue keeps
the same queue rules for jobs with keys (:class:`herdsim.model.queues.KeyedQueue`).

- :class:`ItemExponential`: ``When(item)`` = base · 2^failures (then failures + 1),
  capped at ``max_delay``; ``Forget`` resets the item's failures (5 ms and 1000 s in
  ``DefaultControllerRateLimiter``).
- :class:`Bucket`: ``golang.org/x/time/rate``'s ``Reserve().Delay()``: a bucket of
  ``burst`` tokens (full at first) refilled at ``rate``/s; every reservation takes a token,
  into debt if need be, and the delay is the debt over the rate (10/s, 100 in the
  default). It is never forgotten: reservations pile up.
- :func:`controller_delay`: ``MaxOfRateLimiter`` of the two (both are asked, always).
- :class:`WorkQueue`: ``Add`` / ``Get`` / ``Done`` with the dirty and processing sets (an
  item added while queued is one item; added while in process, it is queued again once
  at ``Done``), and ``AddAfter`` keeping the earliest ready time of an item waiting.
"""

from __future__ import annotations

import heapq
from collections import deque

BASE_DELAY = 0.005  # default_rate_limiters.go:52
MAX_DELAY = 1000.0
BUCKET_RATE = 10.0  # default_rate_limiters.go:54
BUCKET_BURST = 100


class ItemExponential:
    """``ItemExponentialFailureRateLimiter``: per-item failures, exponential delay."""

    def __init__(self, base: float = BASE_DELAY, max_delay: float = MAX_DELAY):
        self.base = base
        self.max_delay = max_delay
        self.failures: dict = {}

    def when(self, item) -> float:
        exp = self.failures.get(item, 0)
        self.failures[item] = exp + 1
        return min(self.base * 2.0 ** exp, self.max_delay)

    def forget(self, item) -> None:
        self.failures.pop(item, None)


class Bucket:
    """``rate.Limiter`` as ``BucketRateLimiter`` uses it: ``reserve(now)`` takes a token
    and returns how long until it is really there."""

    def __init__(self, rate: float = BUCKET_RATE, burst: int = BUCKET_BURST):
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.last: float | None = None

    def reserve(self, now: float) -> float:
        if self.last is not None and now > self.last:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        if self.last is None or now > self.last:
            self.last = now
        self.tokens -= 1
        return -self.tokens / self.rate if self.tokens < 0 else 0.0


def controller_delay(items: ItemExponential, bucket: Bucket, item, now: float) -> float:
    """``DefaultControllerRateLimiter().When(item)``: the larger of the two delays."""
    return max(items.when(item), bucket.reserve(now))


class WorkQueue:
    """``queue.go``'s ``Typed`` queue plus ``delaying_queue.go``'s ``AddAfter``."""

    def __init__(self):
        self.queue: deque = deque()
        self.dirty: set = set()
        self.processing: set = set()
        self.waiting: dict = {}  # item -> ready time (AddAfter)
        self._heap: list = []

    def add(self, item) -> None:
        if item in self.dirty:
            return
        self.dirty.add(item)
        if item in self.processing:
            return
        self.queue.append(item)

    def get(self):
        """The next item (None when empty); it is now in process."""
        if not self.queue:
            return None
        item = self.queue.popleft()
        self.processing.add(item)
        self.dirty.discard(item)
        return item

    def done(self, item) -> None:
        self.processing.discard(item)
        if item in self.dirty:
            self.queue.append(item)

    def add_after(self, item, delay: float, now: float) -> None:
        """Add *item* at ``now + delay``; an item already waiting keeps the earlier time."""
        if delay <= 0:
            self.add(item)
            return
        ready = now + delay
        if item in self.waiting and self.waiting[item] <= ready:
            return
        self.waiting[item] = ready
        heapq.heappush(self._heap, (ready, id(item), item))

    def next_ready(self) -> float:
        """When the earliest waiting item is due (inf when none waits)."""
        while self._heap and self.waiting.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)  # superseded by an earlier ready time
        return self._heap[0][0] if self._heap else float("inf")

    def release(self, now: float) -> None:
        """Add every waiting item due by *now*."""
        while self.next_ready() <= now:
            _, _, item = heapq.heappop(self._heap)
            del self.waiting[item]
            self.add(item)

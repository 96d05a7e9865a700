"""Netflix concurrency-limits' ``AIMDLimit`` (``limit/AIMDLimit.java``), as shipped.

A drop, or an rtt above ``timeout``, multiplies the limit by ``backoff_ratio`` (then
truncates it to an int); otherwise the limit grows by one when ``inflight * 2 >= limit``.
The result is clamped to [``min_limit``, ``max_limit``]. Defaults are the Builder's:
initial 20, min 20, max 200, backoff 0.9, timeout 5 s.
"""

from __future__ import annotations


class AIMDLimit:
    """Additive increase, multiplicative decrease, one update per sample."""

    def __init__(self, initial_limit: int = 20, min_limit: int = 20, max_limit: int = 200,
                 backoff_ratio: float = 0.9, timeout: float = 5.0):
        if not 0.5 <= backoff_ratio < 1.0:
            raise ValueError("backoff_ratio must be in the range [0.5, 1.0)")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.limit = initial_limit
        self.min_limit, self.max_limit = min_limit, max_limit
        self.backoff_ratio, self.timeout = backoff_ratio, timeout

    def limit_at(self, now: float) -> int:
        return self.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        self.on_sample(start, now - start, inflight, dropped)

    def on_sample(self, start: float, rtt: float, inflight: int, dropped: bool) -> None:
        """``AbstractLimit.onSample``: one sample of the library's ``_update``."""
        limit = self.limit
        if dropped or rtt > self.timeout:
            limit = int(limit * self.backoff_ratio)
        elif inflight * 2 >= limit:
            limit = limit + 1
        self.limit = min(self.max_limit, max(self.min_limit, limit))

"""A rate limiter (token bucket) as a pure object: the downstream's 429s."""

from __future__ import annotations


class TokenBucket:
    """A rate limiter: ``rate`` tokens per second, at most ``burst`` banked."""

    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst, self.tokens, self.last = rate, burst, burst, 0.0

    def take(self, now: float) -> bool:
        """Take one token if the bucket holds a whole one at *now*."""
        tokens = self.tokens + (now - self.last) * self.rate
        self.last = now
        if tokens > self.burst:
            tokens = self.burst
        if tokens >= 1.0:
            self.tokens = tokens - 1.0
            return True
        self.tokens = tokens
        return False

"""A rate limiter (token bucket) as a pure object: the downstream's 429s."""

from __future__ import annotations

import math


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

    def wait(self, now: float) -> float:
        """Seconds *w* from *now* until the bucket next holds a whole token (0 if it does):
        the least *w* found such that ``take(now + w)`` succeeds in floating point (a
        rounded-down *w* would bring a caller back one ulp early, forever)."""
        if min(self.burst, self.tokens + (now - self.last) * self.rate) >= 1.0:
            return 0.0
        wait = (1.0 - self.tokens) / self.rate - (now - self.last)
        bump = math.ulp(now + wait)  # then doubled: a few ulps at most, and it ends
        while min(self.burst, self.tokens + (now + wait - self.last) * self.rate) < 1.0:
            wait += bump
            bump *= 2.0
        return wait

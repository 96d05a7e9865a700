"""The downstream's rate limiter (``downstream.rate_limit.kind``), its 429s: a token
bucket (the default) or a fixed window (a counter per window, as Brooker's
``cache_sim.py`` backend counts), each a member with its limiter as a pure object."""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import Period


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


class FixedWindowCounter:
    """At most ``limit`` calls a window. A window opens at the first call more than
    ``window`` after the last one opened (not on a clock's tick); every call counts,
    the refused ones too (``cache_sim.py``'s ``Backend.get``)."""

    __slots__ = ("limit", "window", "opened", "count")

    def __init__(self, limit: int, window: float):
        self.limit, self.window, self.opened, self.count = limit, window, 0.0, 0

    def take(self, now: float) -> bool:
        if now - self.opened > self.window:
            self.opened, self.count = now, 0
        self.count += 1
        return self.count <= self.limit

    def wait(self, now: float) -> float:
        """Seconds until a call would be let through (0 if one would be now)."""
        if now - self.opened > self.window or self.count < self.limit:
            return 0.0
        wait = self.opened + self.window - now
        bump = math.ulp(self.opened + self.window)
        while (now + wait) - self.opened <= self.window:
            wait += bump
            bump *= 2.0
        return wait


class RateLimit(Member):
    """A rate limit: its limiter and the calls per second it lets through (``rate``)."""

    emulated: ClassVar[bool] = False

    @abstractmethod
    def build(self) -> TokenBucket | FixedWindowCounter:
        """The limiter, fresh."""


class Bucket(RateLimit):
    """``kind: token_bucket`` (the default)."""

    kind: Literal["token_bucket"] = "token_bucket"
    rate: float = Field(gt=0, description="calls per second")
    burst: float = Field(100.0, ge=1, description="bucket size, calls")
    about: ClassVar[str] = "a token bucket: rate calls per second, burst banked"
    emulated: ClassVar[bool] = True  # the emulator keeps one
    fluid: ClassVar[str | None] = "throughput capped at rate"

    def build(self) -> TokenBucket:
        return TokenBucket(self.rate, self.burst)


class FixedWindow(RateLimit):
    """``kind: fixed_window``: ``limit`` calls per ``window``, refused calls counted."""

    kind: Literal["fixed_window"]
    limit: int = Field(ge=1, description="calls let through per window")
    window: Period = Field(1.0, description="the window, opened by the first call after "
                                            "the last one closed")
    about: ClassVar[str] = "a counter per window: limit calls, the rest refused"
    fluid: ClassVar[str | None] = "throughput capped at limit / window"

    @property
    def rate(self) -> float:  # type: ignore[override]
        """Calls per second it lets through at most, on average."""
        return self.limit / self.window

    def build(self) -> FixedWindowCounter:
        return FixedWindowCounter(self.limit, self.window)


FAMILY = Family("rate limit", "rate limit", "kind", (Bucket, FixedWindow),
                default="token_bucket")
Limit = FAMILY.union()

"""Netflix concurrency-limits' ``AIMDLimit`` (``limit/AIMDLimit.java``), as shipped.

A drop, or an rtt above ``timeout``, multiplies the limit by ``backoff_ratio`` (then
truncates it to an int); otherwise the limit grows by one when ``inflight * 2 >= limit``.
The result is clamped to [``min_limit``, ``max_limit``]. Defaults are the Builder's:
initial 20, min 20, max 200, backoff 0.9, timeout 5 s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.fields import PositiveDuration
from herdsim.policies.limiters.base import Limiter, Ordered
from herdsim.policies.limiters.window import windowed


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


class Aimd(Ordered):
    """``kind: aimd``: Netflix's AIMDLimit."""

    kind: Literal["aimd"]
    initial_limit: int | None = Field(None, ge=1)
    min_limit: int | None = Field(None, ge=0)
    max_limit: int | None = Field(None, ge=1)
    backoff_ratio: float | None = Field(None, ge=0.5, lt=1)
    timeout: PositiveDuration | None = Field(None, description="an rtt above it backs off")
    windowed: bool | None = Field(None, description="Netflix WindowedLimit (1 s, 10 "
                                  "samples) around it; default: no")
    about: ClassVar[str] = "additive increase, multiplicative decrease (Netflix AIMDLimit)"
    defaults: ClassVar[tuple[int, int]] = (20, 200)

    def build(self, draw: Callable[[], float]) -> Limiter:
        """The limiter (*draw*: uniform numbers, unused)."""
        return windowed(AIMDLimit(**self.given()), self.windowed or False)

"""What the downstream and :class:`~herdsim.policies.limiters.window.WindowedLimit` read of a
limiter (structural types: the limiters do not inherit them)."""

from __future__ import annotations

from typing import Protocol


class Limiter(Protocol):
    """An admission limit, as the downstream reads it."""

    def limit_at(self, now: float) -> int:
        """The limit on calls admitted (in service plus waiting) at *now*."""
        ...

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        """A call admitted at *start*, with *inflight* admitted then, left at *now*."""
        ...


class Limit(Limiter, Protocol):
    """Netflix concurrency-limits' ``Limit``: updated by one sample (an rtt) at a time."""

    limit: int

    def on_sample(self, start: float, rtt: float, inflight: int, dropped: bool) -> None:
        """``Limit.onSample``."""
        ...

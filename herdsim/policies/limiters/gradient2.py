"""Netflix concurrency-limits' ``Gradient2Limit`` (``limit/Gradient2Limit.java``), as
shipped, with its ``ExpAvgMeasurement`` of the long-term rtt.

Per sample: ``long_rtt`` is the mean of the first 10 rtts, then an EMA with factor
2 / (``long_window`` + 1); when ``long_rtt / rtt > 2`` it decays × 0.95 (after the
sample was added, so the gradient below still sees the undecayed value). While
``inflight < limit / 2`` the limit stays. Otherwise gradient = clamp(``rtt_tolerance`` ×
long_rtt / rtt, 0.5, 1), new = limit × gradient + ``queue_size``, then smoothed:
limit × (1 − ``smoothing``) + new × ``smoothing``, clamped to [``min_limit``,
``max_limit``]. Defaults are the Builder's: initial 20, min 20, max 200, smoothing 0.2,
queue size 4, long window 600, tolerance 1.5. The library's own example wraps it in a
``WindowedLimit`` (1 s, 10 samples): so does herdsim by default (:mod:`.window`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.limiters.base import Limiter, Ordered
from herdsim.policies.limiters.window import windowed


class ExpAvgMeasurement:
    """``limit/measurement/ExpAvgMeasurement.java``: a plain mean over the warm-up
    samples, then an exponential average with factor 2 / (window + 1)."""

    def __init__(self, window: int, warmup: int):
        self.window, self.warmup = window, warmup
        self.value, self.total, self.count = 0.0, 0.0, 0

    def add(self, sample: float) -> float:
        if self.count < self.warmup:
            self.count += 1
            self.total += sample
            self.value = self.total / self.count
        else:
            factor = 2.0 / (self.window + 1)
            self.value = self.value * (1 - factor) + sample * factor
        return self.value


class Gradient2Limit:
    """The gradient of long-term to short-term rtt, with a queue-size allowance."""

    def __init__(self, initial_limit: int = 20, min_limit: int = 20, max_limit: int = 200,
                 smoothing: float = 0.2, queue_size: int = 4, long_window: int = 600,
                 rtt_tolerance: float = 1.5):
        if rtt_tolerance < 1.0:
            raise ValueError("rtt_tolerance must be >= 1.0")
        self.estimated = float(initial_limit)
        self.limit = initial_limit
        self.min_limit, self.max_limit = min_limit, max_limit
        self.smoothing, self.queue_size, self.tolerance = smoothing, queue_size, rtt_tolerance
        self.long_rtt = ExpAvgMeasurement(long_window, 10)

    def limit_at(self, now: float) -> int:
        return self.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        self.on_sample(start, now - start, inflight, dropped)

    def on_sample(self, start: float, rtt: float, inflight: int, dropped: bool) -> None:
        """``AbstractLimit.onSample`` with the library's ``_update`` (drops are ignored)."""
        estimated = self.estimated
        long_rtt = self.long_rtt.add(rtt)
        if long_rtt / rtt > 2:
            self.long_rtt.value *= 0.95
        if inflight < estimated / 2:
            self.limit = int(estimated)
            return
        gradient = max(0.5, min(1.0, self.tolerance * long_rtt / rtt))
        new = estimated * gradient + self.queue_size
        new = estimated * (1 - self.smoothing) + new * self.smoothing
        new = max(self.min_limit, min(self.max_limit, new))
        self.estimated = new
        self.limit = int(new)


class Gradient2(Ordered):
    """``kind: gradient2``: Netflix's Gradient2Limit, windowed as the library's example."""

    kind: Literal["gradient2"]
    initial_limit: int | None = Field(None, ge=1)
    min_limit: int | None = Field(None, ge=0)
    max_limit: int | None = Field(None, ge=1)
    smoothing: float | None = Field(None, gt=0, le=1)
    queue_size: int | None = Field(None, ge=0)
    long_window: int | None = Field(None, ge=1)
    rtt_tolerance: float | None = Field(None, ge=1)
    windowed: bool | None = Field(None, description="Netflix WindowedLimit (1 s, 10 "
                                  "samples) around it; default: yes")
    about: ClassVar[str] = "the long-term rtt against the current one (Netflix " \
                           "Gradient2Limit, windowed)"
    defaults: ClassVar[tuple[int, int]] = (20, 200)

    def build(self, draw: Callable[[], float]) -> Limiter:
        """The limiter (*draw*: uniform numbers, unused)."""
        return windowed(Gradient2Limit(**self.given()),
                        True if self.windowed is None else self.windowed)

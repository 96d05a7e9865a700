"""Netflix concurrency-limits' ``VegasLimit`` (``limit/VegasLimit.java``), the library's
default ``Limit`` (``AbstractLimiter.Builder``), as shipped.

The first sample (or any shorter one) sets ``rtt_noload``; every ``probe_multiplier`` ×
limit × U(0.5, 1) samples, one sample resets it (a probe). Otherwise the queue estimate is
``ceil(limit × (1 − rtt_noload / rtt))``, and with f(l) = max(1, floor(log10 l)): a drop
decreases the limit by f; with ``inflight * 2 < limit`` nothing changes; a queue ≤ f
adds β = 6f, a queue < α = 3f adds f, a queue > β takes f off; in between nothing
changes. The new limit is clamped to [1, ``max_limit``] and smoothed. Defaults are the
Builder's: initial 20, max 1000, smoothing 1.0, probe multiplier 30.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.limiters.base import Admission, Limiter
from herdsim.policies.limiters.window import windowed


def log10_root(limit: int) -> int:
    """``Log10RootIntFunction``: max(1, floor(log10 limit)) (1 for 0 too)."""
    return max(1, int(math.log10(limit))) if limit > 0 else 1


class VegasLimit:
    """TCP Vegas applied to concurrency: grow while no queue forms, shrink when one does."""

    def __init__(self, draw: Callable[[], float], initial_limit: int = 20,
                 max_limit: int = 1000, smoothing: float = 1.0, probe_multiplier: int = 30,
                 alpha: Callable[[int], int] | None = None,
                 beta: Callable[[int], int] | None = None,
                 threshold: Callable[[int], int] = log10_root,
                 increase: Callable[[float], float] | None = None,
                 decrease: Callable[[float], float] | None = None):
        self.estimated = float(initial_limit)
        self.limit = initial_limit
        self.max_limit, self.smoothing = max_limit, smoothing
        self.probe_multiplier = probe_multiplier
        self.alpha = alpha or (lambda limit: 3 * log10_root(limit))
        self.beta = beta or (lambda limit: 6 * log10_root(limit))
        self.threshold = threshold
        self.increase = increase or (lambda limit: limit + log10_root(int(limit)))
        self.decrease = decrease or (lambda limit: limit - log10_root(int(limit)))
        self.rtt_noload = 0.0
        self._draw = draw
        self._probe_count = 0
        self._probe_jitter = 0.5 + 0.5 * draw()  # ThreadLocalRandom.nextDouble(0.5, 1)

    def limit_at(self, now: float) -> int:
        return self.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        self.on_sample(start, now - start, inflight, dropped)

    def on_sample(self, start: float, rtt: float, inflight: int, dropped: bool) -> None:
        """``AbstractLimit.onSample`` with the library's ``_update``."""
        if rtt <= 0:
            raise ValueError(f"rtt must be >0 but got {rtt}")
        self._probe_count += 1
        if self._probe_jitter * self.probe_multiplier * self.estimated <= self._probe_count:
            self._probe_jitter = 0.5 + 0.5 * self._draw()
            self._probe_count = 0
            self.rtt_noload = rtt
            return
        if self.rtt_noload == 0 or rtt < self.rtt_noload:
            self.rtt_noload = rtt
            return
        self._update(rtt, inflight, dropped)

    def _update(self, rtt: float, inflight: int, dropped: bool) -> None:
        estimated = self.estimated
        queue = math.ceil(estimated * (1 - self.rtt_noload / rtt))
        if dropped:
            new = self.decrease(estimated)
        elif inflight * 2 < estimated:
            return
        else:
            current = int(estimated)
            alpha, beta = self.alpha(current), self.beta(current)
            if queue <= self.threshold(current):
                new = estimated + beta
            elif queue < alpha:
                new = self.increase(estimated)
            elif queue > beta:
                new = self.decrease(estimated)
            else:
                return
        new = max(1.0, min(self.max_limit, new))
        new = (1 - self.smoothing) * estimated + self.smoothing * new
        self.estimated = new
        self.limit = int(new)


class Vegas(Admission):
    """``kind: vegas``: Netflix's VegasLimit, the library's default."""

    kind: Literal["vegas"]
    initial_limit: int | None = Field(None, ge=1)
    max_limit: int | None = Field(None, ge=1)
    smoothing: float | None = Field(None, gt=0, le=1)
    probe_multiplier: int | None = Field(None, ge=1)
    windowed: bool | None = Field(None, description="Netflix WindowedLimit (1 s, 10 "
                                  "samples) around it; default: no")
    about: ClassVar[str] = "TCP Vegas on concurrency: grows while no queue forms " \
                           "(Netflix VegasLimit)"

    def build(self, draw: Callable[[], float]) -> Limiter:
        """The limiter; *draw* (uniform numbers) times its probes."""
        return windowed(VegasLimit(draw=draw, **self.given()), self.windowed or False)

"""Envoy's adaptive concurrency filter, its gradient controller
(``source/extensions/filters/http/adaptive_concurrency/controller/gradient_controller.cc``),
as shipped, driven by simulated time instead of dispatcher timers.

* **minRTT window.** At start, and every ``min_rtt_interval`` plus a jitter of up to
  ``jitter`` of it (whole milliseconds, ``random() % ceil(interval_ms × jitter)``), the
  limit is pinned to ``min_concurrency`` and the previous one kept aside; latency samples
  from calls started before the window are disregarded. Once ``request_count`` samples
  are in, minRTT becomes their ``percentile``, the old limit comes back, and both timers
  restart.
* **Sample windows.** Every ``interval`` (Envoy's ``concurrency_update_interval``, which
  Envoy requires and gives no default: herdsim uses 100 ms, its documentation's example)
  outside a minRTT window, the samples' ``percentile`` (p50) is sampleRTT and, with
  gradient = clamp(minRTT × (1 + ``buffer``) / sampleRTT, 0.5, 2) and l = limit ×
  gradient, the limit becomes ``int(l + √l)`` clamped to [``min_concurrency``,
  ``max_concurrency``]. An empty window changes nothing; a sample window ending inside a
  minRTT window is given up, and the timer waits for the minRTT window to end.
* **Stuck at the minimum.** The fifth consecutive window that sets the limit to
  ``min_concurrency`` (outside a minRTT window) starts a minRTT window at once.
* **Samples.** As Envoy's filter takes them: a latency (whole µs, truncated) for every
  forwarded call whose answer is sent, whatever its status; none for a call the client
  resets first (``cancelLatencySample``: the client gave up, its place frees at once:
  :attr:`GradientController.sees_client_reset`), nor for one refused at the limit. The
  percentile is read as Envoy reads it, from libcircllhist's log-linear histogram
  (:mod:`.histogram`), into whole µs; so are minRTT and sampleRTT kept.

Read at envoyproxy/envoy@c35f67fb14e41582c2530dcdad417f2516113d0f (no release tag could be
resolved; main @149521d8 adds ``min_concurrency_limit`` and ``fixed_value``, unset by
default, not modelled): docs/mitigations.md has the lines.

Defaults are Envoy's: request_count 50, jitter 15 %, min_concurrency 3, buffer 25 %,
max_concurrency 1000, percentile 50 %. Envoy has no default for the minRTT interval
either: herdsim uses 60 s, its documentation's example.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.fields import Fraction, PositiveDuration
from herdsim.policies.limiters.base import Admission
from herdsim.policies.limiters.histogram import quantile


def micros(seconds: float) -> int:
    """A latency in whole µs, truncated as Envoy's ``duration_cast`` does (of a clock in
    ns: simulated time is rounded to the ns first, so 5 ms is 5,000 µs, not 4,999)."""
    return round(seconds * 1e9) // 1000


class GradientController:
    """Envoy's gradient controller: ``limit_at(now)`` runs the timers due by *now*."""

    sees_client_reset = True  # a proxy: a client's reset ends its call here at once

    def __init__(self, draw: Callable[[], float], interval: float = 0.1,
                 min_rtt_interval: float = 60.0, request_count: int = 50,
                 jitter: float = 0.15, min_concurrency: int = 3, buffer: float = 0.25,
                 max_concurrency: int = 1000, percentile: float = 0.5, start: float = 0.0):
        self._draw = draw
        self.interval, self.min_rtt_interval = interval, min_rtt_interval
        self.request_count, self.jitter = request_count, jitter
        self.min_concurrency, self.max_concurrency = min_concurrency, max_concurrency
        self.buffer, self.q = buffer, percentile
        self.limit = min_concurrency
        self.deferred = 0  # the limit set aside during a minRTT window (0: none)
        self.samples: list[int] = []  # latencies in whole µs
        self.min_rtt_us = 0
        self.sample_rtt_us = 0
        self.min_rtt_epoch = start
        self.consecutive_min = 0
        self.min_rtt_due: float | None = None  # the minRTT timer (None: disabled)
        self.sample_due: float | None = None  # the sample-reset timer
        self._enter_min_rtt_window(start)
        self.sample_due = start + interval

    @property
    def in_min_rtt_window(self) -> bool:
        return self.deferred > 0

    @property
    def min_rtt(self) -> float:
        """minRTT in seconds."""
        return self.min_rtt_us / 1e6

    def limit_at(self, now: float) -> int:
        """Run the timers due by *now* (in time order), then the limit."""
        while True:
            sample_due, min_rtt_due = self.sample_due, self.min_rtt_due
            if min_rtt_due is not None and min_rtt_due <= now and (
                    sample_due is None or min_rtt_due <= sample_due):
                self.min_rtt_due = None
                self._enter_min_rtt_window(min_rtt_due)
            elif sample_due is not None and sample_due <= now:
                self.sample_due = None
                if not self.in_min_rtt_window:
                    self._reset_sample_window(sample_due)
                    self.sample_due = sample_due + self.interval
            else:
                return self.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        """``recordLatencySample`` for a call answered now; ``cancelLatencySample`` (no
        sample) for one dropped."""
        self.limit_at(now)
        if dropped or start < self.min_rtt_epoch:
            return
        self.samples.append(micros(now - start))
        if self.in_min_rtt_window and len(self.samples) >= self.request_count:
            self._update_min_rtt(now)

    # -- the controller's own steps, as named in gradient_controller.cc ------------------

    def _enter_min_rtt_window(self, now: float) -> None:
        if self.in_min_rtt_window:
            return
        self.deferred = self.limit
        self._update_limit(self.min_concurrency, now)
        self.samples.clear()
        self.min_rtt_epoch = now

    def _update_min_rtt(self, now: float) -> None:
        if self.samples:
            self.min_rtt_us = self._aggregate()
        self._update_limit(self.deferred, now)  # still inside the window, as in Envoy
        self.deferred = 0
        interval_ms = round(self.min_rtt_interval * 1000)
        jitter_ms = 0
        if self.jitter:
            jitter_ms = int(self._draw() * math.ceil(interval_ms * self.jitter))
        self.min_rtt_due = now + (interval_ms + jitter_ms) / 1000
        self.sample_due = now + self.interval

    def _reset_sample_window(self, now: float) -> None:
        if not self.samples:
            return
        self.sample_rtt_us = self._aggregate()
        self._update_limit(self._new_limit(), now)

    def _aggregate(self) -> int:
        """``processLatencySamplesAndClear``: the samples' percentile, in whole µs."""
        value = int(quantile(self.samples, self.q))
        self.samples.clear()
        return value

    def _new_limit(self) -> int:
        buffered = self.min_rtt_us + self.min_rtt_us * self.buffer
        # a 0 µs sampleRTT (Envoy asserts it away in debug builds) is an infinite gradient
        raw = buffered / self.sample_rtt_us if self.sample_rtt_us else math.inf
        gradient = max(0.5, min(2.0, raw))
        limit = self.limit * gradient
        new = int(limit + math.sqrt(limit))
        return max(self.min_concurrency, min(self.max_concurrency, new))

    def _update_limit(self, new: int, now: float) -> None:
        old, self.limit = self.limit, new
        if not self.in_min_rtt_window and old == self.min_concurrency == new:
            self.consecutive_min += 1
        else:
            self.consecutive_min = 0
        if self.consecutive_min >= 5:
            self.min_rtt_due = now  # Envoy: the minRTT timer, enabled for 0 ms


class Envoy(Admission):
    """``kind: envoy``: Envoy's adaptive concurrency gradient controller."""

    kind: Literal["envoy"]
    interval: PositiveDuration | None = Field(None, description="concurrency_update_interval "
                                              "(100 ms)")
    min_rtt_interval: PositiveDuration | None = Field(None, description="minRTT re-measured "
                                                      "this often (60 s)")
    request_count: int | None = Field(None, ge=1)
    jitter: Fraction | None = None
    min_concurrency: int | None = Field(None, ge=1)
    buffer: float | None = Field(None, ge=0)
    max_concurrency: int | None = Field(None, ge=1)
    percentile: Fraction | None = None
    about: ClassVar[str] = "Envoy's adaptive concurrency filter (gradient controller)"

    def build(self, draw: Callable[[], float]) -> GradientController:
        """The controller; *draw* (uniform numbers) jitters its minRTT windows."""
        return GradientController(draw=draw, **self.given())

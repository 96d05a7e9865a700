"""A circuit breaker with Resilience4j/Polly semantics, as a pure object (no SimPy).

States ``CLOSED`` → ``OPEN`` when, over the sliding window (time- or count-based) with at
least ``minimum_calls`` calls, the failure rate or the slow-call rate reaches its
threshold. ``OPEN`` refuses calls for ``open_duration`` (times ``open_duration_multiplier``
per consecutive trip, up to ``max_open_duration``), then lets ``half_open_calls`` probes
through (``HALF_OPEN``): a failed probe reopens it, ``half_open_calls`` successful probes
close it. Results that arrive while ``OPEN`` are ignored, as in Resilience4j.

The breaker family has one member today, :class:`Resilience4j` (``kind: resilience4j``, the
default, so a scenario leaves it out): its config, and ``build`` for the breaker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import MAX_WORKERS, NonNegativeDuration, Period, PositiveDuration
from herdsim.policies.windows import CountWindow, TimeWindow

if TYPE_CHECKING:  # the fluid gates import numba: only predict builds one
    from herdsim.policies.breaker_fluid import BreakerGate

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


class CircuitBreaker:
    """One breaker. ``listener`` (if set) is called after every state change."""

    def __init__(self, cfg, listener: Callable[[CircuitBreaker, float], None] | None = None):
        self.cfg = cfg
        self.window = (CountWindow(cfg.window_calls, 3) if cfg.window_calls
                       else TimeWindow(cfg.window, 3))
        self.state = CLOSED
        self.open_until = 0.0
        self.trips = 0
        self._consecutive_trips = 0
        self._probes_left = 0
        self._probe_successes = 0
        self.listener = listener
        self.slow_threshold = cfg.slow_call_threshold

    def blocked(self, now: float) -> bool:
        """True while the breaker would refuse a call made now (without taking a permit)."""
        state = self.state
        if state == CLOSED:
            return False
        if state == OPEN:
            return now < self.open_until
        return self._probes_left == 0

    def permit(self, now: float) -> bool:
        """May a call be made now? In half-open this takes one probe permit."""
        state = self.state
        if state == CLOSED:
            return True
        if state == OPEN:
            if now < self.open_until:
                return False
            self._transition(HALF_OPEN, now)
        if self._probes_left > 0:
            self._probes_left -= 1
            return True
        return False

    def record(self, now: float, failed: bool, slow: bool = False) -> None:
        """The result of a call that was permitted."""
        state = self.state
        if state == CLOSED:
            window = self.window
            window.record(now, (1, failed, slow))
            calls, failures, slows = window.totals
            cfg = self.cfg
            if calls >= cfg.minimum_calls and (
                failures / calls >= cfg.failure_rate_threshold
                or slows / calls >= cfg.slow_call_rate_threshold
            ):
                self._open(now)
        elif state == HALF_OPEN:
            if failed or slow:
                self._open(now)
            else:
                self._probe_successes += 1
                if self._probe_successes >= self.cfg.half_open_calls:
                    self._consecutive_trips = 0
                    self._transition(CLOSED, now)

    def _open(self, now: float) -> None:
        cfg = self.cfg
        duration = cfg.open_duration * cfg.open_duration_multiplier ** self._consecutive_trips
        if cfg.max_open_duration is not None:
            duration = min(duration, cfg.max_open_duration)
        self._consecutive_trips += 1
        self.trips += 1
        self.open_until = now + duration
        self._transition(OPEN, now)

    def _transition(self, state: str, now: float) -> None:
        self.state = state
        if state == HALF_OPEN:
            self._probes_left = self.cfg.half_open_calls
            self._probe_successes = 0
        elif state == CLOSED:
            self.window.clear()
        if self.listener is not None:
            self.listener(self, now)


class Resilience4j(Member):
    """``kind: resilience4j`` (the default): a breaker with Resilience4j/Polly semantics,
    off unless ``enabled``."""

    kind: Literal["resilience4j"] = "resilience4j"
    enabled: bool = False
    scope: Literal["worker", "pool", "client"] = "worker"
    retries_only: bool = False
    failure_rate_threshold: float = Field(0.4, gt=0, le=1)
    window: Period = 30.0
    window_calls: int | None = Field(None, ge=1, le=MAX_WORKERS,
                                     description="count-based window instead")
    minimum_calls: int = Field(20, ge=1, le=MAX_WORKERS)
    slow_call_threshold: PositiveDuration | None = None
    slow_call_rate_threshold: float = Field(1.0, gt=0, le=1)
    open_duration: PositiveDuration = 10.0
    open_duration_multiplier: float = Field(1.0, ge=1)
    max_open_duration: PositiveDuration | None = None
    half_open_calls: int = Field(3, ge=1, le=MAX_WORKERS)
    resume_jitter: NonNegativeDuration = Field(
        0.0, description="queue workers held by the breaker resume U(0, this) after it lets go")
    about: ClassVar[str] = "closed, open, half-open over a time- or count-based window " \
                           "(Resilience4j, Polly)"
    fast_path: ClassVar[bool] = False  # enabled, it gates every call
    emulated: ClassVar[bool] = True  # the testbed's workers run it (testbed/shared.py)
    fluid: ClassVar[str | None] = "an on/off gate: calls stop for open_duration once the " \
                                  "failure rate reaches failure_rate_threshold"

    def keeps_fast_path(self) -> bool:
        """A breaker that is not enabled gates nothing."""
        return not self.enabled

    def fluid_gate(self, dt: float, workers: int, service_mean: float = 0.0
                   ) -> BreakerGate | None:
        """Its on/off gate on a fluid's calls (:mod:`herdsim.policies.breaker_fluid`; its
        probes take the service's *service_mean*); None when off, or for what the gate
        lacks (a count window, slow calls, retries only, open-loop clients)."""
        if not self.enabled or self.window_calls is not None or self.retries_only \
                or self.slow_call_threshold is not None or self.scope == "client":
            return None
        from herdsim.policies.breaker_fluid import BreakerGate  # (numba: predict only)

        return BreakerGate(self, dt, workers, service_mean)

    def build(self, listener: Callable[[CircuitBreaker, float], None] | None = None
              ) -> CircuitBreaker:
        """The breaker (*listener*: called after every state change)."""
        return CircuitBreaker(self, listener)


FAMILY = Family("circuit breaker", "circuit breaker", "kind", (Resilience4j,),
                default="resilience4j")
Breaker = FAMILY.union()

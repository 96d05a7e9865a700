"""A circuit breaker with Resilience4j/Polly semantics, as a pure object (no SimPy).

States ``CLOSED`` → ``OPEN`` when, over the sliding window (time- or count-based) with at
least ``minimum_calls`` calls, the failure rate or the slow-call rate reaches its
threshold. ``OPEN`` refuses calls for ``open_duration`` (times ``open_duration_multiplier``
per consecutive trip, up to ``max_open_duration``), then lets ``half_open_calls`` probes
through (``HALF_OPEN``): a failed probe reopens it, ``half_open_calls`` successful probes
close it. Results that arrive while ``OPEN`` are ignored, as in Resilience4j.
"""

from __future__ import annotations

from collections.abc import Callable

from herdsim.policies.windows import CountWindow, TimeWindow

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

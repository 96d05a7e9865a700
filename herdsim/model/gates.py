"""Breaker glue: the SimPy side of a pure :class:`~herdsim.policies.breaker.CircuitBreaker`.

A :class:`BreakerGate` wakes the processes waiting on its breaker; :class:`BreakerStats`
counts, across every gate of a run, how many breakers are not closed and for how long.
"""

from __future__ import annotations

import simpy

from herdsim.policies.breaker import CLOSED, OPEN


class BreakerGate:
    """Wakes the processes waiting on a breaker whenever it changes state or its open
    period ends, and keeps the breaker statistics (how many open, for how long)."""

    def __init__(self, env: simpy.Environment, breaker, stats: BreakerStats,
                 resume_jitter: float = 0.0, draw=None):
        self.env = env
        self.breaker = breaker
        self.stats = stats
        self.resume_jitter = resume_jitter
        self._draw = draw
        self._event: simpy.Event | None = None
        self.open_since = -1.0  # when it left the closed state; -1 while closed
        breaker.listener = self._changed

    def wait(self) -> simpy.Event:
        if self._event is None:
            self._event = simpy.Event(self.env)
        return self._event

    def wait_jittered(self):
        """Wait for the next change, then U(0, resume_jitter) more: waiters released
        together by a closing breaker do not come back as one herd."""
        yield self.wait()
        if self.resume_jitter:
            yield self.env.timeout(self.resume_jitter * self._draw())

    def _changed(self, breaker, now: float) -> None:
        self.stats.transition(self, breaker.state, now)
        if breaker.state == OPEN:
            timer = self.env.timeout(breaker.open_until - now)
            timer.callbacks.append(self._wake)
        self._wake()

    def _wake(self, _event=None) -> None:
        event, self._event = self._event, None
        if event is not None:
            event.succeed()


class BreakerStats:
    """How many breakers are not closed right now, and the time they spent so."""

    def __init__(self) -> None:
        self.not_closed = 0
        self.time_open = 0.0

    def transition(self, gate: BreakerGate, state: str, now: float) -> None:
        was_closed = gate.open_since < 0
        if state == CLOSED:
            if not was_closed:
                self.not_closed -= 1
                self.time_open += now - gate.open_since
                gate.open_since = -1.0
        elif was_closed:
            self.not_closed += 1
            gate.open_since = now

    def total_open(self, gates: list[BreakerGate], now: float) -> float:
        """Breaker-seconds spent not closed, the periods still running included."""
        return self.time_open + sum(now - g.open_since for g in gates if g.open_since >= 0)

"""The circuit breaker's fluid form made real: an on/off gate on a fluid's calls.

Closed, it counts the calls and failures of a trailing time window; at ``minimum_calls``
or more and a failure share at or above ``failure_rate_threshold`` it opens, and every
call waits (the queue workers hold their jobs) for ``open_duration`` (× the multiplier per
consecutive trip, up to ``max_open_duration``). Then it half-opens: its
``half_open_calls`` probes go out if a call made now would be served (the downstream up,
a slot or a place in the room free), else it reopens; the rest keep waiting until the
probes are back, the slowest of them after the room's wait plus the expected longest of
``half_open_calls`` service times (exponential at the service's mean, as the fluid serves:
mean × (1 + 1/2 + … + 1/n)); then it closes and lets the held calls go together, or
reopens if the downstream failed meanwhile. Closed, a run of failing calls trips it once
it has heard enough of them (:meth:`BreakerGate.trips_after`): what a herd let go meets
when it crashes the downstream. Per worker, each worker's breaker hears 1/N of the calls:
the same share, ``minimum_calls`` × N of the pool's.
"""

from __future__ import annotations

import math

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


class BreakerGate:
    """One breaker for the pool's fluid (see the module docstring)."""

    def __init__(self, cfg, dt: float, workers: int, service_mean: float = 0.0):
        self.threshold = cfg.failure_rate_threshold
        self.probes = cfg.half_open_calls
        self.probe_time = service_mean * sum(1.0 / k for k in range(1, self.probes + 1))
        self.probing = 0  # probes that go out at this step (the step it half-opens)
        self.minimum = cfg.minimum_calls * (workers if cfg.scope == "worker" else 1)
        self.open_duration, self.multiplier = cfg.open_duration, cfg.open_duration_multiplier
        self.longest = cfg.max_open_duration
        self.dt = dt
        self.size = max(1, math.ceil(cfg.window / dt - 1e-9))
        self.calls = [0.0] * self.size
        self.failures = [0.0] * self.size
        self.call_sum = self.failure_sum = 0.0
        self.state, self.until, self.trips, self.streak = CLOSED, 0, 0, 0

    def blocked(self, i: int, healthy: bool, wait: float = 0.0) -> bool:
        """Whether calls wait at step *i*; *healthy*: a probe made now would be served,
        after a wait of *wait* seconds in the room."""
        self.probing = 0
        if self.state == OPEN and i >= self.until:
            if not healthy:
                self._open(i)
                return True
            self.state, self.probing = HALF_OPEN, self.probes
            self.until = i + round((wait + self.probe_time) / self.dt)
        if self.state == HALF_OPEN:
            if not healthy:
                self._open(i)
            elif i >= self.until:
                self.state, self.streak = CLOSED, 0
                self._clear()
        return self.state != CLOSED

    def trips_after(self) -> float:
        """Failing calls it must hear, closed, before it trips (inf: none trip it)."""
        if self.state != CLOSED:
            return 0.0
        need = self.minimum - self.call_sum
        if self.threshold < 1.0:
            need = max(need, (self.threshold * self.call_sum - self.failure_sum)
                       / (1.0 - self.threshold))
        elif self.failure_sum < self.call_sum:
            return math.inf
        return max(need, 1.0)

    def heard(self, i: int, calls: float, failures: float) -> None:
        """Step *i*'s calls and failures, while closed."""
        if self.state != CLOSED:
            return
        at = i % self.size
        self.call_sum += calls - self.calls[at]
        self.failure_sum += failures - self.failures[at]
        self.calls[at], self.failures[at] = calls, failures
        if self.call_sum >= self.minimum and self.failure_sum >= self.threshold * self.call_sum:
            self._open(i)

    def _open(self, i: int) -> None:
        duration = self.open_duration * self.multiplier ** self.streak
        if self.longest is not None:
            duration = min(duration, self.longest)
        self.state, self.until = OPEN, i + max(1, round(duration / self.dt))
        self.trips += 1
        self.streak += 1
        self._clear()

    def _clear(self) -> None:
        self.calls = [0.0] * self.size
        self.failures = [0.0] * self.size
        self.call_sum = self.failure_sum = 0.0

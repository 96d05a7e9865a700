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
it has heard enough of them (:func:`breaker_trips_after`): what a herd let go meets
when it crashes the downstream. Per worker, each worker's breaker hears 1/N of the calls:
the same share, ``minimum_calls`` × N of the pool's.

The rule is compiled functions over the gate's parameters and state
(:mod:`herdsim.policies.fluid_gate`): the fluid model's compiled loop calls them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from herdsim.policies.fluid_gate import FluidGate

CLOSED, OPEN, HALF_OPEN = 0.0, 1.0, 2.0
# parameters, and the state: its header, then the window's two rings (calls, failures)
THRESHOLD, MINIMUM, OPEN_DURATION, MULTIPLIER, LONGEST, DT, SIZE, PROBES, PROBE_TIME = \
    range(9)
STATE, UNTIL, TRIPS, STREAK, CALL_SUM, FAILURE_SUM, PROBING, RINGS = range(8)


@njit(cache=True)
def _open(params, state, i):  # pragma: no cover - compiled
    duration = min(params[OPEN_DURATION] * params[MULTIPLIER] ** state[STREAK],
                   params[LONGEST])
    state[STATE] = OPEN
    state[UNTIL] = i + max(1, round(duration / params[DT]))
    state[TRIPS] += 1
    state[STREAK] += 1
    _clear(state)


@njit(cache=True)
def _clear(state):  # pragma: no cover - compiled
    state[CALL_SUM] = 0.0
    state[FAILURE_SUM] = 0.0
    state[RINGS:] = 0.0


@njit(cache=True)
def breaker_blocked(params, state, i, healthy, wait):  # pragma: no cover - compiled
    """Whether calls wait at step *i*; *healthy*: a probe made now would be served,
    after a wait of *wait* seconds in the room. The probes that go out at this step (the
    step it half-opens) are left in the state's ``PROBING``."""
    state[PROBING] = 0.0
    if state[STATE] == OPEN and i >= state[UNTIL]:
        if not healthy:
            _open(params, state, i)
            return True
        state[STATE] = HALF_OPEN
        state[PROBING] = params[PROBES]
        state[UNTIL] = i + round((wait + params[PROBE_TIME]) / params[DT])
    if state[STATE] == HALF_OPEN:
        if not healthy:
            _open(params, state, i)
        elif i >= state[UNTIL]:
            state[STATE] = CLOSED
            state[STREAK] = 0.0
            _clear(state)
    return state[STATE] != CLOSED


@njit(cache=True)
def breaker_trips_after(params, state):  # pragma: no cover - compiled
    """Failing calls it must hear, closed, before it trips (inf: none trip it)."""
    if state[STATE] != CLOSED:
        return 0.0
    need = params[MINIMUM] - state[CALL_SUM]
    if params[THRESHOLD] < 1.0:
        need = max(need, (params[THRESHOLD] * state[CALL_SUM] - state[FAILURE_SUM])
                   / (1.0 - params[THRESHOLD]))
    elif state[FAILURE_SUM] < state[CALL_SUM]:
        return math.inf
    return max(need, 1.0)


@njit(cache=True)
def breaker_heard(params, state, i, calls, failures):  # pragma: no cover - compiled
    """Step *i*'s calls and failures, while closed."""
    if state[STATE] != CLOSED:
        return
    size = int(params[SIZE])
    at = i % size
    state[CALL_SUM] += calls - state[RINGS + at]
    state[FAILURE_SUM] += failures - state[RINGS + size + at]
    state[RINGS + at] = calls
    state[RINGS + size + at] = failures
    if state[CALL_SUM] >= params[MINIMUM] and \
            state[FAILURE_SUM] >= params[THRESHOLD] * state[CALL_SUM]:
        _open(params, state, i)


class BreakerGate(FluidGate):
    """One breaker for the pool's fluid (see the module docstring)."""

    def __init__(self, cfg, dt: float, workers: int, service_mean: float = 0.0):
        size = max(1, math.ceil(cfg.window / dt - 1e-9))
        longest = math.inf if cfg.max_open_duration is None else cfg.max_open_duration
        probes = cfg.half_open_calls
        super().__init__(
            np.array([cfg.failure_rate_threshold,
                      cfg.minimum_calls * (workers if cfg.scope == "worker" else 1),
                      cfg.open_duration, cfg.open_duration_multiplier, longest, dt, size,
                      probes, service_mean * sum(1.0 / k for k in range(1, probes + 1))]),
            np.zeros(RINGS + 2 * size))

    def blocked(self, i: int, healthy: bool, wait: float = 0.0) -> bool:
        """Whether calls wait at step *i*; *healthy*: a probe made now would be served,
        after a wait of *wait* seconds in the room."""
        return bool(breaker_blocked(self.params, self.state, i, healthy, wait))

    def heard(self, i: int, calls: float, failures: float) -> None:
        """Step *i*'s calls and failures, while closed."""
        breaker_heard(self.params, self.state, i, calls, failures)

    def trips_after(self) -> float:
        """Failing calls it must hear, closed, before it trips (inf: none trip it)."""
        return float(breaker_trips_after(self.params, self.state))

    @property
    def probing(self) -> int:
        """The probes that go out at the step last asked (the step it half-opened)."""
        return int(self.state[PROBING])

    @property
    def trips(self) -> int:
        """Times it opened."""
        return int(self.state[TRIPS])

"""The circuit breaker's fluid form made real: an on/off gate on a fluid's calls.

Closed, it counts the calls and failures of a trailing time window; at ``minimum_calls``
or more and a failure share at or above ``failure_rate_threshold`` it opens, and every
call waits (the queue workers hold their jobs) for ``open_duration`` (× the multiplier per
consecutive trip, up to ``max_open_duration``). Then it half-opens: its probes succeed
when a call made now would (the downstream up, a slot or a place in the room free), and
it closes, letting the held calls go together, or reopens. Per worker, each worker's
breaker hears 1/N of the calls: the same share, ``minimum_calls`` × N of the pool's.

The rule is two compiled functions over the gate's parameters and state
(:mod:`herdsim.policies.fluid_gate`): the fluid model's compiled loop calls them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from herdsim.policies.fluid_gate import FluidGate

CLOSED, OPEN, HALF_OPEN = 0.0, 1.0, 2.0
# parameters, and the state: its header, then the window's two rings (calls, failures)
THRESHOLD, MINIMUM, OPEN_DURATION, MULTIPLIER, LONGEST, DT, SIZE = range(7)
STATE, UNTIL, TRIPS, STREAK, CALL_SUM, FAILURE_SUM, RINGS = range(7)


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
def breaker_blocked(params, state, i, healthy):  # pragma: no cover - compiled
    """Whether calls wait at step *i*; *healthy*: a probe made now would succeed."""
    if state[STATE] == OPEN and i >= state[UNTIL]:
        state[STATE] = HALF_OPEN
    if state[STATE] == HALF_OPEN:
        if healthy:
            state[STATE] = CLOSED
            state[STREAK] = 0.0
            _clear(state)
        else:
            _open(params, state, i)
    return state[STATE] == OPEN


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

    def __init__(self, cfg, dt: float, workers: int):
        size = max(1, math.ceil(cfg.window / dt - 1e-9))
        longest = math.inf if cfg.max_open_duration is None else cfg.max_open_duration
        super().__init__(
            np.array([cfg.failure_rate_threshold,
                      cfg.minimum_calls * (workers if cfg.scope == "worker" else 1),
                      cfg.open_duration, cfg.open_duration_multiplier, longest, dt, size]),
            np.zeros(RINGS + 2 * size))

    def blocked(self, i: int, healthy: bool) -> bool:
        """Whether calls wait at step *i*; *healthy*: a probe made now would succeed."""
        return bool(breaker_blocked(self.params, self.state, i, healthy))

    def heard(self, i: int, calls: float, failures: float) -> None:
        """Step *i*'s calls and failures, while closed."""
        breaker_heard(self.params, self.state, i, calls, failures)

    @property
    def trips(self) -> int:
        """Times it opened."""
        return int(self.state[TRIPS])

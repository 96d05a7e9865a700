"""Retry budgets as limits on a fluid's retry flow (the members' ``fluid`` forms made
real): each step the model offers the retries it wants and learns what succeeded; the
gate answers how many may go. Amounts, not calls; one budget for the pool.

* :class:`BucketGate` (``token_bucket``): a retry pays ``retry_cost`` (``timeout_cost``
  after a timeout) while the bucket stays at or above its floor; a success earns
  ``success_refund`` (a successful retry its cost back, with ``refund_retry_cost``); a
  failed call loses ``failure_cost``; crediting first tries, each first try earns.
* :class:`RatioGate` (``ratio``): retries in the trailing window at most ``ratio`` ×
  first tries in it + ``min_per_second`` × window.

Each rule is a pair of compiled functions over two float arrays, its parameters and its
state (:class:`~herdsim.policies.fluid_gate.FluidGate`), which the fluid model's compiled
loop calls each step.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from herdsim.policies.fluid_gate import FluidGate

KIND = 0  # every gate's parameters start with its kind (the rule :func:`allow` applies)
BUCKET, RATIO_BUDGET = 1.0, 2.0
# the bucket's parameters and state, by index
CAPACITY, RETRY_COST, TIMEOUT_COST, FAILURE_COST, REFUND, REFUND_RETRY, FLOOR, \
    FIRST_TRY_CREDIT = range(1, 9)
TOKENS = 0


@njit(cache=True)
def bucket_allow(params, state, wanted, timed_out):  # pragma: no cover - compiled
    """Of *wanted* retries (*timed_out* of them after a timeout), how many may go."""
    if wanted <= 0:
        return 0.0
    cost = (params[TIMEOUT_COST] * timed_out + params[RETRY_COST] * (wanted - timed_out)) \
        / wanted
    allowed = wanted if cost <= 0 else min(wanted, max(state[TOKENS] - params[FLOOR], 0.0)
                                          / cost)
    state[TOKENS] -= allowed * cost
    return allowed


@njit(cache=True)
def bucket_heard(params, state, first_tries, first_ok, retries_ok, failed
                 ):  # pragma: no cover - compiled
    """What this step's calls did: first tries sent, successes of first tries and of
    retries, failed calls."""
    if params[FIRST_TRY_CREDIT]:
        earned = first_tries * params[REFUND]
    else:
        earned = first_ok * params[REFUND] + retries_ok * (
            params[RETRY_COST] if params[REFUND_RETRY] else params[REFUND])
    state[TOKENS] = min(params[CAPACITY], max(0.0, state[TOKENS] + earned
                                              - failed * params[FAILURE_COST]))


@njit(cache=True)
def allow(params, state, wanted, timed_out):  # pragma: no cover - compiled
    """Of *wanted* retries, how many the gate of *params*' kind lets go."""
    if params[KIND] == BUCKET:
        return bucket_allow(params, state, wanted, timed_out)
    return ratio_allow(params, state, wanted, timed_out)


@njit(cache=True)
def heard(params, state, first_tries, first_ok, retries_ok, failed
          ):  # pragma: no cover - compiled
    """This step's calls, told to the gate of *params*' kind."""
    if params[KIND] == BUCKET:
        bucket_heard(params, state, first_tries, first_ok, retries_ok, failed)
    else:
        ratio_heard(params, state, first_tries, first_ok, retries_ok, failed)


class BudgetGate(FluidGate):
    """A budget's gate: :meth:`allow` and :meth:`heard` apply its kind's compiled rule
    (:func:`allow`, :func:`heard`), as the fluid model's loop does."""

    def allow(self, wanted: float, timed_out: float) -> float:
        """Of *wanted* retries (*timed_out* of them after a timeout), how many may go."""
        return float(allow(self.params, self.state, wanted, timed_out))

    def heard(self, first_tries: float, first_ok: float, retries_ok: float,
              failed: float) -> None:
        """What this step's calls did: first tries sent, successes of first tries and of
        retries, failed calls."""
        heard(self.params, self.state, first_tries, first_ok, retries_ok, failed)


class BucketGate(BudgetGate):
    """A pool's token bucket on fluid amounts (the fields of
    :class:`~herdsim.policies.budgets.token_bucket.TokenBucketBudget`)."""

    def __init__(self, capacity: float, retry_cost: float, timeout_cost: float,
                 failure_cost: float, success_refund: float, refund_retry_cost: bool,
                 floor: float, strict: bool, credit_on_first_try: bool = False,
                 throttling_cost: float | None = None):
        super().__init__(
            np.array([BUCKET, capacity, retry_cost, timeout_cost, failure_cost, success_refund,
                      float(refund_retry_cost), floor * capacity,
                      float(credit_on_first_try)]),
            np.array([float(capacity)]))

    @property
    def tokens(self) -> float:
        """The tokens in the bucket now."""
        return float(self.state[TOKENS])


# the ratio budget's parameters, and its state: two sums, the window's position, and
# its two rings (first tries, retries), each SIZE long
RATIO, RESERVE, SIZE = range(1, 4)
FIRST_SUM, RETRY_SUM, AT, RINGS = range(4)


@njit(cache=True)
def ratio_allow(params, state, wanted, timed_out):  # pragma: no cover - compiled
    """Of *wanted* retries, how many the window leaves room for."""
    room = params[RATIO] * state[FIRST_SUM] + params[RESERVE] - state[RETRY_SUM]
    allowed = min(wanted, max(room, 0.0))
    state[RINGS + int(params[SIZE]) + int(state[AT])] += allowed
    state[RETRY_SUM] += allowed
    return allowed


@njit(cache=True)
def ratio_heard(params, state, first_tries, first_ok, retries_ok, failed
                ):  # pragma: no cover - compiled
    """Count this step's first tries and move the window on a step."""
    size = int(params[SIZE])
    at = int(state[AT])
    state[RINGS + at] += first_tries
    state[FIRST_SUM] += first_tries
    at = (at + 1) % size
    state[AT] = at
    state[FIRST_SUM] -= state[RINGS + at]
    state[RETRY_SUM] -= state[RINGS + size + at]
    state[RINGS + at] = 0.0
    state[RINGS + size + at] = 0.0
    if state[FIRST_SUM] < 1e-9:  # (rounding)
        state[FIRST_SUM] = max(state[FIRST_SUM], 0.0)


class RatioGate(BudgetGate):
    """Finagle's RetryBudget on fluid amounts, over a trailing window of *steps*."""

    def __init__(self, steps: int, ratio: float, reserve: float):
        size = max(1, steps)
        super().__init__(np.array([RATIO_BUDGET, ratio, reserve, float(size)]),
                         np.zeros(RINGS + 2 * size))


def window_steps(window: float, dt: float) -> int:
    """Steps of *dt* in a window of *window* seconds."""
    return max(1, math.ceil(window / dt - 1e-9))

"""Retry budgets as limits on a fluid's retry flow (the members' ``fluid`` forms made
real): each step the model offers the retries it wants and learns what succeeded; the
gate answers how many may go. Amounts, not calls; one budget for the whole pool.

* :class:`BucketGate` (``token_bucket``): a retry pays ``retry_cost`` (``timeout_cost``
  after a timeout) while the bucket stays at or above its floor; a success earns
  ``success_refund`` (a successful retry its cost back, with ``refund_retry_cost``); a
  failed call loses ``failure_cost``; crediting first tries, each first try earns.
* :class:`RatioGate` (``ratio``): retries in the trailing window at most ``ratio`` ×
  first tries in it + ``min_per_second`` × window.
"""

from __future__ import annotations

import math


class BucketGate:
    """A pool's token bucket on fluid amounts (the fields of
    :class:`~herdsim.policies.budgets.token_bucket.TokenBucketBudget`)."""

    def __init__(self, capacity: float, retry_cost: float, timeout_cost: float,
                 failure_cost: float, success_refund: float, refund_retry_cost: bool,
                 floor: float, strict: bool, credit_on_first_try: bool = False,
                 throttling_cost: float | None = None):
        self.capacity = self.tokens = capacity
        self.retry_cost, self.timeout_cost = retry_cost, timeout_cost
        self.failure_cost, self.success_refund = failure_cost, success_refund
        self.refund_retry_cost, self.floor = refund_retry_cost, floor * capacity
        self.first_try_credit = credit_on_first_try

    def allow(self, wanted: float, timed_out: float) -> float:
        """Of *wanted* retries (*timed_out* of them after a timeout), how many may go."""
        if wanted <= 0:
            return 0.0
        cost = (self.timeout_cost * timed_out + self.retry_cost * (wanted - timed_out)) \
            / wanted
        allowed = wanted if cost <= 0 else min(wanted, max(self.tokens - self.floor, 0.0)
                                              / cost)
        self.tokens -= allowed * cost
        return allowed

    def heard(self, first_tries: float, first_ok: float, retries_ok: float,
              failed: float) -> None:
        """What this step's calls did: first tries sent, successes of first tries and of
        retries, failed calls."""
        if self.first_try_credit:
            earned = first_tries * self.success_refund
        else:
            earned = first_ok * self.success_refund + retries_ok * (
                self.retry_cost if self.refund_retry_cost else self.success_refund)
        self.tokens = min(self.capacity, max(0.0, self.tokens + earned
                                             - failed * self.failure_cost))


class RatioGate:
    """Finagle's RetryBudget on fluid amounts, over a trailing window of *steps*."""

    def __init__(self, steps: int, ratio: float, reserve: float):
        self.ratio, self.reserve = ratio, reserve
        self.size = max(1, steps)
        self.firsts = [0.0] * self.size
        self.retries = [0.0] * self.size
        self.first_sum = self.retry_sum = 0.0
        self.at = 0

    def allow(self, wanted: float, timed_out: float) -> float:
        """Of *wanted* retries, how many the window leaves room for."""
        room = self.ratio * self.first_sum + self.reserve - self.retry_sum
        allowed = min(wanted, max(room, 0.0))
        self.retries[self.at] += allowed
        self.retry_sum += allowed
        return allowed

    def heard(self, first_tries: float, first_ok: float, retries_ok: float,
              failed: float) -> None:
        """Count this step's first tries and move the window on a step."""
        self.firsts[self.at] += first_tries
        self.first_sum += first_tries
        self.at = (self.at + 1) % self.size
        self.first_sum -= self.firsts[self.at]
        self.retry_sum -= self.retries[self.at]
        self.firsts[self.at] = self.retries[self.at] = 0.0
        if self.first_sum < 1e-9:  # (rounding)
            self.first_sum = max(self.first_sum, 0.0)


def window_steps(window: float, dt: float) -> int:
    """Steps of *dt* in a window of *window* seconds."""
    return max(1, math.ceil(window / dt - 1e-9))

"""Retry budgets and client-side throttling, as pure objects (no SimPy).

Three mechanisms, each answering "may this job retry (or call) now?":

* ``TokenBucketBudget`` — the AWS SDK standard retry quota and gRPC retry throttling, as
  presets of one mechanism: a bucket of ``capacity`` tokens; a retry costs ``retry_cost``
  (``timeout_cost`` after a timeout) and is refused when the bucket cannot pay; a failed
  call loses ``failure_cost``; a success earns ``success_refund`` (AWS also gives back
  what a successful retry cost). A retry needs the bucket to stay at or above ``floor`` ×
  capacity after paying (strictly above with ``strict``): gRPC allows retries only while
  tokens > capacity/2.
* ``AdaptiveThrottle`` — Google SRE client-side throttling: every call is refused
  locally with probability ``max(0, (requests - k * accepts) / (requests + 1))`` over a
  sliding window.
* ``RatioBudget`` — Finagle-style: retries within the window may not exceed
  ``ratio`` × first tries + ``min_per_second`` × window.
"""

from __future__ import annotations

from herdsim.policies.windows import TimeWindow

PRESETS = {
    "aws": {"capacity": 500.0, "retry_cost": 5.0, "timeout_cost": 10.0, "failure_cost": 0.0,
            "success_refund": 1.0, "refund_retry_cost": True, "floor": 0.0, "strict": False},
    "grpc": {"capacity": 10.0, "retry_cost": 0.0, "timeout_cost": 0.0, "failure_cost": 1.0,
             "success_refund": 0.1, "refund_retry_cost": False, "floor": 0.5, "strict": True},
}


class TokenBucketBudget:
    """A retry quota. ``allow_retry`` withdraws; ``on_result`` earns and loses tokens."""

    gates_calls = False

    def __init__(self, capacity: float, retry_cost: float, timeout_cost: float,
                 failure_cost: float, success_refund: float, refund_retry_cost: bool,
                 floor: float, strict: bool):
        self.capacity = capacity
        self.tokens = capacity
        self.retry_cost = retry_cost
        self.timeout_cost = timeout_cost
        self.failure_cost = failure_cost
        self.success_refund = success_refund
        self.refund_retry_cost = refund_retry_cost
        self.floor = floor * capacity
        self.strict = strict

    def allow_call(self, now: float) -> bool:
        return True

    def allow_retry(self, now: float, timed_out: bool) -> tuple[bool, float]:
        """Whether a retry may go ahead, and the tokens it took."""
        cost = self.timeout_cost if timed_out else self.retry_cost
        left = self.tokens - cost
        if left > self.floor if self.strict else left >= self.floor:
            self.tokens = left
            return True, cost
        return False, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        """A call ended; *paid* is what its retry cost (0 for a first try)."""
        if ok:
            earned = paid if (self.refund_retry_cost and paid) else self.success_refund
            self.tokens = min(self.capacity, self.tokens + earned)
        elif self.failure_cost:
            self.tokens = max(0.0, self.tokens - self.failure_cost)


class AdaptiveThrottle:
    """Google SRE client-side throttling over a sliding window of requests and accepts."""

    gates_calls = True

    def __init__(self, window: float, k: float, draw):
        self.k = k
        self.window = TimeWindow(window, 2)  # (requests, accepts)
        self._draw = draw

    def rejection_probability(self, now: float) -> float:
        requests, accepts = self.window.advance(now)
        return max(0.0, (requests - self.k * accepts) / (requests + 1))

    def allow_call(self, now: float) -> bool:
        p = self.rejection_probability(now)
        allowed = p == 0.0 or self._draw() >= p
        if not allowed:
            self.window.record(now, (1, 0))  # a locally refused request still counts
        return allowed

    def allow_retry(self, now: float, timed_out: bool) -> tuple[bool, float]:
        return True, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        self.window.record(now, (1, 1 if ok else 0))


class RatioBudget:
    """Retries limited to ``ratio`` of first tries (plus a floor) over a sliding window."""

    gates_calls = False

    def __init__(self, window: float, ratio: float, min_per_second: float):
        self.ratio = ratio
        self.reserve = min_per_second * window
        self.window = TimeWindow(window, 2)  # (first tries, retries)

    def allow_call(self, now: float) -> bool:
        return True

    def allow_retry(self, now: float, timed_out: bool) -> tuple[bool, float]:
        first, retries = self.window.advance(now)
        if retries + 1 <= self.ratio * first + self.reserve:
            self.window.record(now, (0, 1))
            return True, 1.0
        return False, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        if not paid:
            self.window.record(now, (1, 0))


def build(cfg, draw) -> TokenBucketBudget | AdaptiveThrottle | RatioBudget:
    """The budget object described by a scenario's ``budget`` section."""
    if cfg.kind == "token_bucket":
        params = dict(PRESETS[cfg.preset]) if cfg.preset else {}
        params.update(cfg.token_params())
        return TokenBucketBudget(**params)
    if cfg.kind == "adaptive":
        return AdaptiveThrottle(cfg.window, cfg.k, draw)
    return RatioBudget(cfg.window, cfg.ratio, cfg.min_per_second)

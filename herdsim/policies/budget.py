"""Retry budgets and client-side throttling, as pure objects (no SimPy).

Three mechanisms, each answering "may this job retry (or call) now?":

* ``TokenBucketBudget`` — the AWS SDK standard retry quota and gRPC retry throttling, as
  presets of one mechanism: a bucket of ``capacity`` tokens; a retry costs ``retry_cost``
  (``timeout_cost`` after a timeout, ``throttling_cost`` after a throttling answer: a 429
  from the rate limiter or the admission) and is refused when the bucket cannot pay; a failed
  call loses ``failure_cost``; a success earns ``success_refund`` (AWS also gives back
  what a successful retry cost). A retry needs the bucket to stay at or above ``floor`` ×
  capacity after paying (strictly above with ``strict``): gRPC allows retries only while
  tokens > capacity/2. With ``credit_on_first_try`` the bucket earns ``success_refund`` on
  every first try instead, whatever its outcome (the original retry simulator's
  AdaptiveRetryStrategy: +0.1 per first try, cap 5, a retry needs more than 1 token and
  takes 1: ``retry_cost`` 1, ``floor`` 0, ``strict``).
* ``AdaptiveThrottle`` — Google SRE client-side throttling: every call is refused
  locally with probability ``max(0, (requests - k * accepts) / (requests + 1))`` over a
  sliding window.
* ``RatioBudget`` — Finagle-style: retries within the window may not exceed
  ``ratio`` × first tries + ``min_per_second`` × window.
* ``CumulativeRatio`` — the cumulative-ratio retry breaker of the original retry
  simulator (mbrooker/simulator_example ``retry_sim``, CircuitBreakerRetryStrategy): it
  counts first tries and failed calls (retries included) since the start; a failure is
  counted first, then retried only while failures / first tries <= ``ratio``. No
  window, no states.
"""

from __future__ import annotations

from herdsim.policies.windows import TimeWindow

# aws: botocore 1.44.8 retries/standard.py RetryQuotaChecker (14 a retry, 5 after a throttling
# error, no timeout cost); aws-1.43: botocore 1.43.x, whose default path cost 5 (10 after a
# timeout). docs/mitigations.md has the table.
PRESETS = {
    "aws": {"capacity": 500.0, "retry_cost": 14.0, "timeout_cost": 14.0,
            "throttling_cost": 5.0, "failure_cost": 0.0, "success_refund": 1.0,
            "refund_retry_cost": True, "floor": 0.0, "strict": False},
    "aws-1.43": {"capacity": 500.0, "retry_cost": 5.0, "timeout_cost": 10.0,
                 "throttling_cost": 5.0, "failure_cost": 0.0, "success_refund": 1.0,
                 "refund_retry_cost": True, "floor": 0.0, "strict": False},
    "grpc": {"capacity": 10.0, "retry_cost": 0.0, "timeout_cost": 0.0, "throttling_cost": 0.0,
             "failure_cost": 1.0, "success_refund": 0.1, "refund_retry_cost": False,
             "floor": 0.5, "strict": True},
}


class TokenBucketBudget:
    """A retry quota. ``allow_retry`` withdraws; ``on_result`` (or, crediting first tries,
    ``allow_call``) earns, and ``on_result`` loses, tokens."""

    def __init__(self, capacity: float, retry_cost: float, timeout_cost: float,
                 failure_cost: float, success_refund: float, refund_retry_cost: bool,
                 floor: float, strict: bool, credit_on_first_try: bool = False,
                 throttling_cost: float | None = None):
        self.gates_calls = credit_on_first_try  # the worker then calls allow_call
        self.capacity = capacity
        self.tokens = capacity
        self.retry_cost = retry_cost
        self.timeout_cost = timeout_cost
        self.throttling_cost = retry_cost if throttling_cost is None else throttling_cost
        self.failure_cost = failure_cost
        self.success_refund = success_refund
        self.refund_retry_cost = refund_retry_cost
        self.floor = floor * capacity
        self.strict = strict

    def allow_call(self, now: float, first: bool = False) -> bool:
        """A call is about to be made; a first try earns ``success_refund`` (first_try
        crediting only: otherwise the worker does not call this)."""
        if first:
            self.tokens = min(self.capacity, self.tokens + self.success_refund)
        return True

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        """Whether a retry may go ahead, and the tokens it took."""
        cost = (self.timeout_cost if timed_out else self.throttling_cost if throttled
                else self.retry_cost)
        left = self.tokens - cost
        if left > self.floor if self.strict else left >= self.floor:
            self.tokens = left
            return True, cost
        return False, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        """A call ended; *paid* is what its retry cost (0 for a first try)."""
        if ok:
            if self.refund_retry_cost and paid:
                earned = paid
            elif self.gates_calls:
                return  # first tries earn the refund, not successes
            else:
                earned = self.success_refund
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

    def allow_call(self, now: float, first: bool = False) -> bool:
        p = self.rejection_probability(now)
        allowed = p == 0.0 or self._draw() >= p
        if not allowed:
            self.window.record(now, (1, 0))  # a locally refused request still counts
        return allowed

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
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

    def allow_call(self, now: float, first: bool = False) -> bool:
        return True

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        first, retries = self.window.advance(now)
        if retries + 1 <= self.ratio * first + self.reserve:
            self.window.record(now, (0, 1))
            return True, 1.0
        return False, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        if not paid:
            self.window.record(now, (1, 0))


class CumulativeRatio:
    """Retries allowed while failed calls / first tries, both counted since the start,
    is at most ``ratio``."""

    gates_calls = True  # first tries are counted when they are made

    def __init__(self, ratio: float):
        self.ratio = ratio
        self.first_tries = 0
        self.failures = 0

    def allow_call(self, now: float, first: bool = False) -> bool:
        if first:
            self.first_tries += 1
        return True

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        return self.failures / self.first_tries <= self.ratio, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        if not ok:
            self.failures += 1


def build(cfg, draw) -> TokenBucketBudget | AdaptiveThrottle | RatioBudget | CumulativeRatio:
    """The budget object described by a scenario's ``budget`` section."""
    if cfg.kind == "token_bucket":
        params = dict(PRESETS[cfg.preset]) if cfg.preset else {}
        params.update(cfg.token_params())
        return TokenBucketBudget(**params, credit_on_first_try=cfg.credit_on == "first_try")
    if cfg.kind == "adaptive":
        return AdaptiveThrottle(cfg.window, cfg.k, draw)
    if cfg.kind == "cumulative_ratio":
        return CumulativeRatio(cfg.ratio)
    return RatioBudget(cfg.window, cfg.ratio, cfg.min_per_second)

"""The token bucket: the AWS SDK standard retry quota and gRPC retry throttling, as presets
of one mechanism.

A bucket of ``capacity`` tokens; a retry costs ``retry_cost`` (``timeout_cost`` after a
timeout, ``throttling_cost`` after a throttling answer: a 429 from the rate limiter or the
admission) and is refused when the bucket cannot pay; a failed call loses
``failure_cost``; a success earns ``success_refund`` (AWS also gives back what a
successful retry cost). A retry needs the bucket to stay at or above ``floor`` × capacity
after paying (strictly above with ``strict``): gRPC allows retries only while tokens >
capacity/2. With ``credit_on: first_try`` the bucket earns ``success_refund`` on every
first try instead, whatever its outcome (the original retry simulator's
AdaptiveRetryStrategy: +0.1 per first try, cap 5, a retry needs more than 1 token and
takes 1: ``retry_cost`` 1, ``floor`` 0, ``strict``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from herdsim.policies.budgets.base import Budget
from herdsim.policies.fields import FieldError

if TYPE_CHECKING:  # the fluid gates import numba: only predict builds one
    from herdsim.policies.budgets.fluid import BucketGate

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
_TOKEN_FIELDS = ("capacity", "retry_cost", "timeout_cost", "failure_cost", "success_refund",
                 "refund_retry_cost", "floor", "strict")


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


class TokenBucket(Budget):
    """``kind: token_bucket``: a preset's bucket, or one with every field given (fields
    set next to a preset win)."""

    kind: Literal["token_bucket"]
    preset: Literal["aws", "aws-1.43", "grpc"] | None = None
    capacity: float | None = Field(None, gt=0, description="tokens")
    retry_cost: float | None = Field(None, ge=0)
    timeout_cost: float | None = Field(None, ge=0)
    throttling_cost: float | None = Field(
        None, ge=0, description="a retry's cost after a throttling answer (a 429); unset: "
                                "retry_cost, or the preset's")
    failure_cost: float | None = Field(None, ge=0)
    success_refund: float | None = Field(None, ge=0)
    credit_on: Literal["success", "first_try"] = Field(
        "success", description="success_refund earned per success or per first try")
    refund_retry_cost: bool | None = None
    floor: float | None = Field(None, ge=0, lt=1, description="fraction of capacity kept")
    strict: bool | None = None
    about: ClassVar[str] = "a bucket of tokens a retry pays from (AWS SDK quota, gRPC " \
                           "retry throttling)"
    fluid: ClassVar[str | None] = "once empty, retries at most success_refund / retry_cost " \
                                  "per success"

    @model_validator(mode="after")
    def _complete(self) -> TokenBucket:
        if self.preset is None:
            missing = [f for f in _TOKEN_FIELDS if getattr(self, f) is None]
            if missing:
                raise FieldError(missing[0], "a token_bucket needs preset: aws|aws-1.43|grpc "
                                             "or every one of " + ", ".join(_TOKEN_FIELDS))
        return self

    def fluid_gate(self, dt: float) -> BucketGate | None:
        """Its bucket on a fluid's amounts, for a pool-wide budget."""
        if self.scope != "pool":
            return None
        from herdsim.policies.budgets.fluid import BucketGate  # (numba: predict only)

        return BucketGate(**self._params(), credit_on_first_try=self.credit_on == "first_try")

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = dict(PRESETS[self.preset]) if self.preset else {}
        params.update({f: getattr(self, f) for f in (*_TOKEN_FIELDS, "throttling_cost")
                       if getattr(self, f) is not None})
        return params

    def build(self, draw: Callable[[], float]) -> TokenBucketBudget:
        """The bucket (*draw*: uniform numbers, unused): the preset's fields, then those
        set here."""
        return TokenBucketBudget(**self._params(),
                                 credit_on_first_try=self.credit_on == "first_try")

"""Envoy's limits on a cluster's requests and retries in flight: the ``max_retries`` and
``max_requests`` circuit breakers and the retry budget.

Read from Envoy (``source/common/upstream/resource_manager_impl.h``, ``api/envoy/config/
cluster/v3/circuit_breaker.proto``, ``source/common/router/retry_state_impl.cc``;
envoyproxy/envoy, the v1.36 line): a retry may start while the retries outstanding are
fewer than ``max_retries`` (default 3), or, with a retry budget, fewer than
``max(min_retry_concurrency, budget_percent / 100 × (requests active + pending))``
(defaults 3 and 20%, the budget off unless configured); else the request fails with no
retry (``upstream_rq_retry_overflow``). A retry counts from when it is sent until its
answer: one waiting in its backoff does not (envoy issue 30205; ``count_backoff: true``
counts it from the decision). A request beyond ``max_requests`` active (default 1024)
fails at once (503, ``upstream_rq_pending_overflow``), and is not retried. Envoy's
``max_pending_requests`` is the fleet's (a tier with replicas: ``balancer.
max_pending_requests``, :mod:`herdsim.policies.balancers.base`), the replicas' slots
standing for the connections; ``max_connections`` has no counterpart of its own here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.budgets.base import Budget
from herdsim.policies.fields import MAX_WORKERS


class EnvoyLimits:
    """The counts the limits read: requests ``active`` (sent, not answered) and
    ``retries`` outstanding."""

    gates_calls = True  # every call is counted, and may overflow max_requests

    def __init__(self, cfg: Envoy):
        self.percent = cfg.budget_percent
        self.floor = cfg.min_retry_concurrency
        self.max_retries = cfg.max_retries
        self.max_requests = cfg.max_requests if cfg.max_requests is not None else float("inf")
        self.count_backoff = cfg.count_backoff
        self.active = 0
        self.retries = 0

    def retry_limit(self) -> float:
        """Retries outstanding allowed now."""
        if self.percent is None:
            return self.max_retries
        return max(self.floor, self.percent / 100.0 * self.active)

    def allow_call(self, now: float, first: bool = False) -> bool:
        if self.active >= self.max_requests:
            if not first and self.count_backoff:
                self.retries -= 1  # the retry counted at its decision never goes
            return False
        self.active += 1
        if not first and not self.count_backoff:
            self.retries += 1
        return True

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        if self.retries >= self.retry_limit():
            return False, 0.0
        if self.count_backoff:
            self.retries += 1
        return True, 1.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        self.active -= 1
        if paid:
            self.retries -= 1


class Envoy(Budget):
    """``kind: envoy``: Envoy's circuit breakers on requests and retries, and its retry
    budget."""

    kind: Literal["envoy"]
    max_retries: int = Field(3, ge=0, le=MAX_WORKERS,
                             description="retries outstanding at most (Envoy's default 3)")
    max_requests: int | None = Field(1024, ge=1, le=MAX_WORKERS,
                                     description="requests active at most (Envoy's "
                                                 "default 1024; null: no limit)")
    budget_percent: float | None = Field(
        None, gt=0, le=100, description="the retry budget: retries outstanding at most this "
                                        "percent of requests active (Envoy: 20 when a "
                                        "budget is configured; null: off, max_retries holds)")
    min_retry_concurrency: int = Field(3, ge=0, le=MAX_WORKERS,
                                       description="the budget's floor of retries")
    count_backoff: bool = Field(False, description="count a retry from its decision, its "
                                                   "backoff included (Envoy does not)")
    about: ClassVar[str] = "retries outstanding ≤ max_retries, or ≤ max(min_retry_" \
                           "concurrency, budget_percent × active); requests ≤ max_requests " \
                           "(Envoy's circuit breakers)"
    fluid: ClassVar[str | None] = "retries in flight ≤ max(floor, percent × calls in flight)"
    gates_every_call: ClassVar[bool] = True  # counts each call: the breaker must not skip one
    emulated: ClassVar[bool] = False

    def build(self, draw: Callable[[], float]) -> EnvoyLimits:
        """The limits' counts (*draw*: unused)."""
        return EnvoyLimits(self)

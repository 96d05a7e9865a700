"""What the fluid model reads of a scenario: an allow-list, so a setting it does not read
is refused (:mod:`herdsim.fluid.support`), never silently ignored.

Two tables. :data:`READS` holds the plain fields by path (list indices dropped), each
read whatever its value or only for the values its rule accepts. :data:`MEMBERS` holds,
by the place they sit, the family members the model implements (a member's ``fluid``
declaration says it has a fluid form; only this table says this model has it), each with
the fields of its own it reads and, where the model has only part of it, a check naming
the field it lacks.
A feature added to the scenario is refused by predict until it is listed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from herdsim.config.scenario import Scenario

Rule = Callable[[Any, Scenario], bool]  # (value, scenario) -> whether the model reads it
ANY: Rule = lambda value, scenario: True  # noqa: E731
STEADY_ARRIVALS = ("poisson", "constant", "trace")  # a rate of the moment, or the trace's


def _strategy(name: Any, scenario: Scenario) -> bool:
    strategy = scenario.retry.build()
    return strategy.fluid is not None and getattr(strategy, "cdf", None) is not None


# path -> (rule, what a value it refuses is: {} the value); a section's own path: read
READS: dict[str, tuple[Rule, str]] = {
    **{path: (ANY, path) for path in (
        "name", "description", "seed", "duration", "bin", "peak_window", "queue",
        "workload", "workload.rate", "workload.profile", "workload.profile.at",
        "workload.profile.rate", "workload.profile.ramp", "workload.trace",
        "workload.trace.file", "workload.trace.format", "workload.trace.time_scale",
        "workload.trace.start", "workload.trace.sha256", "workload.backlog",
        "workload.poison_fraction", "workload.spikes", "workload.spikes.at",
        "workload.spikes.duration", "workload.spikes.rate",
        "workers", "workers.count",
        "downstream", "downstream.concurrency", "downstream.queue_limit",
        "downstream.timeout", "downstream.serve_abandoned", "downstream.rate_limit",
        "downstream.rate_limit.rate", "downstream.rate_limit.burst", "downstream.outages",
        "downstream.overload", "downstream.overload.collapse",
        "downstream.overload.collapse.window", "downstream.overload.collapse.threshold",
        "downstream.overload.collapse.load_limit",
        "downstream.overload.collapse.restart_time",
        "retry", "retry.preset", "retry.base", "retry.cap", "retry.max_retries",
        "retry.poison_retryable", "retry.retry_after", "retry.retry_after_limit",
        "dlq")},
    "workload.arrivals": (lambda v, sc: v in STEADY_ARRIVALS,
                          "{} arrivals (cohorts a rate of the moment would average out)"),
    "downstream.model": (lambda v, sc: v == "queue", "the {} downstream model"),
    "downstream.retry_after": (lambda v, sc: isinstance(v, (int, float)),
                               "the rate limiter's own Retry-After ({})"),
    "retry.strategy": (_strategy, "the {} backoff strategy: it has no distribution of one "
                                  "sleep per retry (a fluid form and its cdf) for the model "
                                  "to read; a decorrelated jitter's sleep depends on the "
                                  "previous one"),
    "retry.params": (_strategy, "params {} of a strategy the model cannot read"),
}


# what a plain field the model does not read is, in words (others: their path and value)
UNREAD = {
    "services": "a call graph", "downstream.name": "a call graph's tier",
    "downstream.calls": "a call graph's calls", "deadline": "deadline propagation",
    "downstream.network_delay": "a network delay",
    "downstream.request_delay": "a request delay", "downstream.replicas": "replicas",
    "downstream.refusal_cost": "a refusal's cost", "downstream.discipline": "a discipline",
    "downstream.overload.latency_per_call": "latency per call",
    "retry.late_answers": "late answers", "retry.throttling_base": "a throttling base",
    "retry.bucket": "a retry token bucket", "retry.retry_on": "retries on some failures",
    "workers.retry_mode": "requeue mode", "workers.attempt_overhead": "attempt overhead",
    "workload.keys": "keys", "workload.restarts": "restarts",
    "dlq.enabled": "redelivery without a DLQ", "downstream.cache": "a cache",
}


@dataclass(frozen=True)
class Implemented:
    """A member the model implements: the fields of its own it reads (its tag among them)
    and, when it has only part of the member, ``lacks(member, scenario)``: ``(field,
    what)`` the model lacks, or None."""

    fields: frozenset[str]
    lacks: Callable[[Any, Scenario], tuple[str, str] | None] = lambda m, sc: None


def _breaker(breaker: Any, scenario: Scenario) -> tuple[str, str] | None:
    if breaker.enabled and breaker.scope == "client":
        return "scope", "a breaker per open-loop client"
    return None


def _budget(budget: Any, scenario: Scenario) -> tuple[str, str] | None:
    if budget.fluid_gate(1e-3) is None:
        return "scope", f"a {budget.kind} budget of scope {budget.scope} (the fluid model " \
                        "has one for the pool)"
    return None


OUTAGE = frozenset({"mode", "start", "duration"})
SERVICE = frozenset({"distribution", "mean", "sigma"})  # read as its mean (the members'
# declared fluid form); lognormal's sigma: the validation's brownout and poison hold it
BREAKER = frozenset({"kind", "enabled", "scope", "failure_rate_threshold", "window",
                     "minimum_calls", "open_duration", "open_duration_multiplier",
                     "max_open_duration", "half_open_calls"})
BUCKET = frozenset({"kind", "scope", "preset", "capacity", "retry_cost", "timeout_cost",
                    "throttling_cost", "failure_cost", "success_refund", "credit_on",
                    "refund_retry_cost", "floor", "strict"})
# place (list indices dropped) -> member name -> what the model reads of it there
MEMBERS: dict[str, dict[str, Implemented]] = {
    "downstream.service": {name: Implemented(SERVICE)
                           for name in ("constant", "exponential", "lognormal")},
    "downstream.outages": {"down": Implemented(OUTAGE),
                           "blackhole": Implemented(OUTAGE),  # validation: needs a timeout
                           "error": Implemented(OUTAGE | {"error_rate"}),
                           "slow": Implemented(OUTAGE | {"factor"})},
    "breaker": {"resilience4j": Implemented(BREAKER, _breaker)},
    "budget": {"ratio": Implemented(frozenset({"kind", "scope", "window", "ratio",
                                               "min_per_second"}), _budget),
               "token_bucket": Implemented(BUCKET, _budget)},
    # where the rate limit is a family (kind: token_bucket | fixed_window), its bucket
    "downstream.rate_limit": {"token_bucket": Implemented(frozenset({"kind", "rate",
                                                                     "burst"}))},
}


def allowed_paths() -> set[str]:
    """Every path (list indices dropped) the model may read: the plain fields, the places
    of the members it implements and those members' own fields there."""
    out = set(READS) | set(MEMBERS)
    for place, members in MEMBERS.items():
        for spec in members.values():
            out |= {f"{place}.{name}" for name in spec.fields}
    return out

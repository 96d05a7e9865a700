"""The scenario's sections: what each field accepts (the whole is
:class:`herdsim.config.scenario.Scenario`).

Every field is documented in ``docs/scenarios.md``. Durations accept ``250ms``, ``10s``,
``2m`` or a number of seconds.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from herdsim.config import fleet
from herdsim.config.schema import GatesCalls
from herdsim.errors import StrategyError
from herdsim.policies import arrivals as sources
from herdsim.policies import balancers, disciplines, downstreams, limiters, presets
from herdsim.policies.autoscale import Autoscale
from herdsim.policies.backoff import ParamsError, Strategy, registry
from herdsim.policies.balancers import outlier
from herdsim.policies.cache import Cache
from herdsim.policies.codel import Codel
from herdsim.policies.criticality import Criticality
from herdsim.policies.degradation import Degradations
from herdsim.policies.distributions import Distribution as Service
from herdsim.policies.distributions import Exponential
from herdsim.policies.durations import format_duration, json_schema, parse_duration
from herdsim.policies.fields import (
    MAX_BACKLOG,
    MAX_RETRIES,
    MAX_WORKERS,
    FieldError,
    Fraction,
    NonNegativeDuration,
    Period,
    PositiveDuration,
    Section,
    number_text,
)
from herdsim.policies.outages import Outage
from herdsim.policies.rate_limit import Limit as RateLimit
from herdsim.policies.refusal_cost import RefusalCost
from herdsim.policies.shedding import Shedding


def _retry_after(value: object) -> object:
    """``limiter`` as it is, anything else a duration >= 0."""
    if value == "limiter":
        return value
    seconds = parse_duration(value)
    if seconds < 0:
        raise ValueError(f"expected a duration >= 0 or limiter, got {value!r}")
    return seconds


RetryAfter = Annotated[float | Literal["limiter"], BeforeValidator(_retry_after),
                      WithJsonSchema({"anyOf": [json_schema(exclusive=False)["anyOf"][0],
                                                json_schema(exclusive=False)["anyOf"][1],
                                                {"const": "limiter"}]})]



class Spike(Section):
    """A window during which arrivals run at another rate."""

    at: NonNegativeDuration
    duration: PositiveDuration
    rate: float = Field(gt=0)


class Step(Section):
    """One step of a rate profile: from ``at`` on the rate is ``rate``; with ``ramp`` it
    moves linearly from the previous step's rate to ``rate`` over [at, at + ramp]."""

    at: NonNegativeDuration
    rate: float = Field(ge=0, description="jobs per second")
    ramp: NonNegativeDuration = 0.0


MAX_SKEWED_KEYS = 10_000_000  # key_skew keeps one float per key


class Workload(Section):
    arrivals: sources.Name = "poisson"
    rate: float = Field(  # type: ignore[assignment]  # None until the load fills it in
        None, gt=0, description="jobs per second (a profile's first step or a trace's mean "
                                "by default)")
    profile: list[Step] = Field([], description="piecewise rates, with optional ramps")
    trace: sources.TraceFile | None = Field(None, description="arrivals: trace reads "
                                                              "arrivals from here")
    burst_size: int | None = Field(None, ge=1, le=MAX_WORKERS,
                                   description="jobs per burst (arrivals: burst; default 100)")
    clients: int | None = Field(None, ge=1, le=MAX_WORKERS, description="arrivals: periodic: "
                                "clients, each firing once an interval")
    interval: Period | None = Field(None, description="arrivals: periodic: the time between "
                                                      "one client's firings")
    offset: Literal["aligned", "random"] | None = Field(
        None, description="arrivals: periodic: every client fires first at 0 (aligned, the "
                          "default) or at a uniform random offset within the interval")
    restarts: list[NonNegativeDuration] | None = Field(
        None, description="arrivals: periodic: times at which every client starts over")
    backlog: int = Field(0, ge=0, le=MAX_BACKLOG, description="jobs already queued at t=0")
    poison_fraction: Fraction = 0.0
    queue_limit: int | None = Field(None, ge=1, description="main-queue length limit")
    spikes: list[Spike] = []
    keys: Annotated[int | None, GatesCalls()] = Field(
        None, ge=1, description="each job is about one of this many keys (a controller's "
                                "objects); a job whose key is queued or in process "
                                "collapses into it (client-go's workqueue)")
    key_skew: float = Field(0.0, ge=0, le=10, description="0: keys drawn uniformly; s > 0: "
                                                          "key i with weight (i + 1)^-s")
    criticality: Annotated[Criticality | None, GatesCalls()] = Field(
        None, description="each job's class (Google SRE's criticality), drawn with these "
                          "shares; the waiting room, shedding, admission limits and CoDel "
                          "drop the lowest class first")

    @model_validator(mode="before")
    @classmethod
    def _source_fields(cls, data: Any, info: ValidationInfo) -> Any:
        """The arrival source's own fields (``burst_size``, ``trace``) only with it."""
        return sources.FAMILY.flat(data, info)

    @model_validator(mode="after")
    def _skewed_keys(self) -> Workload:
        if self.key_skew and self.keys is None:
            raise FieldError("key_skew", "key_skew shapes workload.keys: set keys")
        if self.key_skew and self.keys is not None and self.keys > MAX_SKEWED_KEYS:
            raise FieldError("keys", f"{number_text(self.keys)} keys with a "
                                              f"key_skew: at most {MAX_SKEWED_KEYS:,} (a "
                                              "table of their weights is kept)")
        return self

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.profile and self.trace is not None:
            raise FieldError("profile", "a profile and a trace both set the rate; "
                                                 "give one")
        steps = self.profile
        if steps:
            if steps[0].at != 0 or steps[0].ramp:
                raise FieldError("profile.0",
                                 "the first step starts at 0s with no ramp (it is the base "
                                 "rate)")
            if steps[0].rate <= 0:
                raise FieldError("profile.0.rate",
                                 "the first step's rate (the base rate) must be > 0")
            for i in range(1, len(steps)):
                if steps[i].at <= steps[i - 1].at:
                    raise FieldError(f"profile.{i}.at",
                                     "steps must come in time order, each after the last")
                if steps[i - 1].at + steps[i - 1].ramp > steps[i].at:
                    raise FieldError(f"profile.{i - 1}.ramp",
                                     "the ramp runs past the next step's at")
            if self.rate is None:
                self.rate = steps[0].rate
            elif self.rate != steps[0].rate:
                raise FieldError("rate", f"{self.rate:g} jobs/s beside a profile, whose first "
                                         f"step sets the rate ({steps[0].rate:g}): remove "
                                         "rate")
        source = self.source()
        if isinstance(source, sources.Periodic):
            own = source.rate()
            if self.profile or self.spikes:
                raise FieldError("profile" if self.profile else "spikes",
                                 "periodic arrivals set their own rate (clients / interval)")
            if self.rate is None:
                self.rate = own
            elif not math.isclose(self.rate, own):
                raise FieldError("rate", f"{self.rate:g} jobs/s beside periodic arrivals, "
                                         f"whose clients / interval set it ({own:g}): remove "
                                         "rate")
        if self.rate is None and self.trace is None:
            raise FieldError("rate", "required field is missing (or give a "
                                              "profile or a trace)")
        return self

    def source(self) -> sources.Source:
        """The arrival source's member, with its own fields."""
        member = sources.FAMILY.member(self.arrivals)
        own = {name: getattr(self, name) for name in member.model_fields
               if getattr(self, name) is not None}
        return cast(sources.Source, member.model_validate(own))

    def profile_rates(self) -> list[float]:
        """Every rate the profile reaches (the base rate without one)."""
        return [step.rate for step in self.profile] or [self.rate]


class Workers(Section):
    count: int | None = Field(
        100, ge=1, le=MAX_WORKERS, description="null = open loop: a caller per job (with "
                                               "autoscale: the count at t=0)")
    autoscale: Annotated[Autoscale | None, GatesCalls()] = None
    clients: int | None = Field(None, ge=1, le=MAX_WORKERS,
                                description="open loop: arrivals spread uniformly over "
                                            "this many clients")
    retry_mode: Annotated[Literal["sleep", "requeue"], GatesCalls()] = "sleep"
    poll_interval: Period = 1.0
    attempt_overhead: Annotated[NonNegativeDuration | Service, GatesCalls()] = Field(
        0.0, description="what one attempt costs the client before the call leaves: a "
                         "duration, or a service distribution drawn per attempt (e.g. the "
                         "turnaround herdsim testbed --calibrate measures)")


class Collapse(Section):
    window: Period = 0.1
    threshold: int | None = Field(None, ge=1, description="calls within window that crash it")
    load_limit: int | None = Field(None, ge=1, description="in flight + waiting that crash it")
    restart_time: PositiveDuration = 5.0

    @model_validator(mode="after")
    def _needs_a_trigger(self) -> Collapse:
        if self.threshold is None and self.load_limit is None:
            raise ValueError("collapse needs a threshold, a load_limit or both")
        return self


class Overload(Section):
    collapse: Collapse | None = None
    latency_per_call: NonNegativeDuration = 0.0
    latency_model: Literal["at_start", "continuous"] = Field(
        "at_start", description="at_start: service fixed when it starts; continuous: calls "
                                "in service slow down together as concurrency grows")




class Downstream(Section):
    model: downstreams.Name = "queue"
    concurrency: int = Field(100, ge=1, le=MAX_WORKERS)
    queue_limit: int | None = Field(None, ge=0, description="waiting room; null = unbounded")
    service: Service = Exponential()
    timeout: PositiveDuration | None = None
    network_delay: Service | None = None
    request_delay: Service | None = Field(
        None, description="time a call spends on the way to the server (network_delay is the "
                          "way back)")
    serve_abandoned: bool = False
    rate_limit: RateLimit | None = None
    cache: Cache | None = Field(None, description="a cache in front of this tier")
    retry_after: RetryAfter | None = Field(
        None, description="Retry-After sent with throttled and rejected answers: a duration, "
                          "or limiter (until the rate limiter next has a token)")
    outages: list[Outage] = []
    overload: Overload = Overload()
    occ: downstreams.OccFields | None = Field(None, description="model: occ only")
    broker: downstreams.BrokerFields | None = Field(None, description="model: broker only")
    discipline: Literal["fifo", "lifo", "adaptive_lifo"] = Field(
        "fifo", description="the waiting room's order; adaptive_lifo: FIFO until "
                            "lifo_threshold calls wait, then LIFO")
    lifo_threshold: int | None = Field(None, ge=1, description="adaptive_lifo: the depth "
                                                               "from which the room is LIFO")
    codel: Codel | None = None
    shedding: Shedding | None = None
    admission: limiters.Admission | None = None
    degradation: Degradations | None = None
    refusal_cost: RefusalCost | None = None
    replicas: int | None = Field(None, ge=1, le=balancers.MAX_REPLICAS,
                                 description="replicas behind a balancer, each its own pool")
    balancer: balancers.BalancerChoice | None = Field(None, description="replicas: who "
                                                                        "gets each call")
    outlier_detection: outlier.OutlierDetection | None = None
    health_check: outlier.HealthCheck | None = None

    @model_validator(mode="before")
    @classmethod
    def _model_fields(cls, data: Any, info: ValidationInfo) -> Any:
        """The model's own fields (``occ``, ``broker``) only with that model."""
        return downstreams.FAMILY.flat(data, info)

    @model_validator(mode="after")
    def _room_and_retry_after(self) -> Downstream:
        self.room()  # its discipline's fields: the member's, and only them
        for name in downstreams.named(self.model).unread(_changed(self)):  # its declaration
            raise FieldError(name, f"the {self.model} model does not read {name} (this one "
                                   f"is model: {self.model})")
        if self.retry_after == "limiter" and self.rate_limit is None:
            raise FieldError("retry_after", "retry_after: limiter needs a rate_limit")
        for part in ("degradation", "refusal_cost"):
            if getattr(self, part) is not None and not downstreams.named(self.model).queueing:
                raise FieldError(part, f"{part} needs a server with slots (model: queue)")
        if self.degradation is not None and self.overload.latency_model != "at_start":
            raise FieldError("degradation", "degradation needs overload.latency_model: "
                                            "at_start")
        for i, outage in enumerate(self.outages):
            if outage.needs_cache and self.cache is None:
                raise FieldError(f"outages.{i}.mode", f"a {outage.name()} outage needs a "
                                                      "cache in front of this tier (cache)")
        fleet.check(self)
        return self

    def room(self) -> disciplines.Discipline:
        """The waiting room's discipline (the member ``discipline`` chooses)."""
        return disciplines.of(self)

    def defends(self) -> bool:
        """Whether the downstream defends itself (a room that may serve the newest call,
        CoDel, shedding or an admission limit): then its admission runs the general path."""
        return (self.room().always is not False or self.codel is not None
                or self.shedding is not None or self.admission is not None)

    def mean_service(self) -> float:
        """Mean service time at full concurrency (latency_per_call included)."""
        return self.service.mean + self.overload.latency_per_call * self.concurrency

    def capacity_rate(self) -> float:
        """Calls per second the downstream can serve when healthy."""
        capacity = self.concurrency / self.mean_service() * (self.replicas or 1)
        if self.rate_limit is not None:
            capacity = min(capacity, self.rate_limit.rate)
        return capacity


def _changed(section: Downstream) -> set[str]:
    """The fields of *section* (and of its ``overload``, dotted) set to other than their
    defaults (a dumped scenario writes every field, at its default)."""
    def changed(part: Section) -> set[str]:
        return {name for name in part.model_fields_set
                if getattr(part, name) != type(part).model_fields[name].get_default(
                    call_default_factory=True)}
    return changed(section) | {f"overload.{name}" for name in changed(section.overload)}


class RetryBucket(Section):
    """A token bucket every retry reserves from (client-go's ``BucketRateLimiter``)."""

    rate: float = Field(gt=0, description="tokens per second")
    burst: int = Field(ge=1, le=MAX_WORKERS, description="bucket size (full at the start)")


class Retry(Section):
    preset: str | None = Field(None, description="a library's policy as shipped "
                                                 "(herdsim presets); fields set here win")
    strategy: str = "exponential"
    base: Period = 0.1
    cap: PositiveDuration = 30.0
    max_retries: int | None = Field(5, ge=0, le=MAX_RETRIES)
    poison_retryable: bool = True
    params: dict[str, Any] = {}
    retry_after: Annotated[Literal["ignore", "use", "at_least"], GatesCalls()] = Field(
        "ignore", description="a server's Retry-After: ignore it, sleep it, or sleep at least it")
    retry_after_limit: PositiveDuration | None = Field(
        None, description="at_least: the Retry-After lengthens the policy's sleep by at most "
                          "this (botocore: 5 s)")
    throttling_base: Annotated[PositiveDuration | None, GatesCalls()] = Field(
        None, description="the base after a throttling answer (see throttling) when it "
                          "differs from base (botocore: 1 s, base 50 ms)")
    throttling: list[Literal[429, 503]] = Field(
        [429], description="the answers this client treats as throttling (the throttling "
                           "base, a budget's throttling_cost, the client limiter): 429, "
                           "and 503 for a service that throttles with it")
    retry_on: list[presets.RetryOn] = Field(
        list(presets.RETRY_ON),
        description="the failures this client retries (reset: a connection refused or "
                    "reset); any other dead-letters at once")
    late_answers: Annotated[bool, GatesCalls()] = Field(
        False, description="an answer that arrives after the timeout completes the job "
                           "and cancels its pending retry (Metafor's model; most clients)")
    bucket: Annotated[RetryBucket | None, GatesCalls()] = Field(
        None, description="a retry waits the larger of its backoff and this shared "
                          "bucket's reservation delay")
    _untrusted: bool = PrivateAttr(False)  # code named, read with trust_code=False

    @model_validator(mode="after")
    def _strategy_exists(self, info: ValidationInfo) -> Retry:
        if self.preset is not None:
            try:
                presets.get(self.preset)
            except ValueError as exc:
                raise FieldError("preset", str(exc)) from None
        if self.cap < self.base:
            raise FieldError(
                "cap",
                f"cap ({format_duration(self.cap)}) is below base ({format_duration(self.base)})",
            )
        if self.throttling_base is not None and self.cap < self.throttling_base:
            raise FieldError(
                "throttling_base",
                f"throttling_base ({format_duration(self.throttling_base)}) is above cap "
                f"({format_duration(self.cap)})")
        if self.retry_after_limit is not None and self.retry_after != "at_least":
            raise FieldError("retry_after_limit",
                             "retry_after_limit applies to retry_after: at_least")
        if not (info.context or {}).get("trust_code", True) \
                and not registry.is_own(self.strategy):
            if not registry.is_import_path(self.strategy) \
                    and self.strategy not in registry.installed():
                raise FieldError("strategy", registry.unknown(self.strategy))
            self._untrusted = True  # code named by a file being read: a name, not resolved
            return self
        try:
            self.build()
        except ParamsError as exc:
            raise FieldError("params", str(exc)) from None
        except (ValueError, StrategyError) as exc:
            raise FieldError("strategy", str(exc)) from None
        return self

    def build(self, throttling: bool = False) -> Strategy:
        """The strategy object this section describes (never one read untrusted); with
        *throttling*, the one that draws after a throttling answer (``throttling_base``)."""
        if self._untrusted:
            raise ValueError(f"strategy {self.strategy!r} was read from a file without "
                             "importing it (a strategy named by an import path is code)")
        base = self.throttling_base if throttling and self.throttling_base else self.base
        return registry.build(self.strategy, base, self.cap, self.params)


class DLQ(Section):
    enabled: bool = True
    redelivery_delay: PositiveDuration = Field(
        1.0, description="DLQ off: a failed job is visible on the main queue again after this"
    )

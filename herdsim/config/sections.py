"""The scenario's sections: what each field accepts (the whole is
:class:`herdsim.config.scenario.Scenario`).

Every field is documented in ``docs/scenarios.md``. Durations accept ``250ms``, ``10s``,
``2m`` or a number of seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from herdsim.config.schema import GatesCalls
from herdsim.errors import StrategyError
from herdsim.policies import limiters, presets, strategies
from herdsim.policies.durations import format_duration, json_schema, parse_duration
from herdsim.policies.fields import (
    FieldError,
    Fraction,
    NonNegativeDuration,
    Period,
    PositiveDuration,
    Section,
    number_text,
)


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


class Trace(Section):
    """Recorded arrivals: every job arrives at a time of the file (× time_scale, + start)."""

    file: str = Field(min_length=1, description="path, relative to the scenario file")
    format: Literal["csv", "osdi"] = Field(
        "csv", description="csv: a time column in seconds; osdi: the OSDI'22 metastability "
                           "artifact's whitespace lines (arrival_s request_type size key)")
    time_scale: float = Field(1.0, gt=0, description="multiplies every time of the file")
    start: NonNegativeDuration = Field(0.0, description="added to every (scaled) time")
    sha256: str | None = Field(None, description="the file's SHA-256, filled on load; a "
                                                 "different file is refused")


MAX_SKEWED_KEYS = 10_000_000  # key_skew keeps one float per key
# Counts that multiply a run's work (docs/scenarios.md, "Bounds"); the rest are held to
# fields.LIMIT. More than any pool, client, room or bucket a scenario models:
MAX_WORKERS = 1_000_000
MAX_BACKLOG = 100_000_000  # jobs queued at t=0
MAX_RETRIES = 1_000  # retries of one call (the libraries' defaults: 0 to 25, or none)


class Workload(Section):
    arrivals: Literal["poisson", "constant", "burst", "trace"] = "poisson"
    rate: float = Field(  # type: ignore[assignment]  # None until the load fills it in
        None, gt=0, description="jobs per second (a profile's first step or a trace's mean "
                                "by default)")
    profile: list[Step] = Field([], description="piecewise rates, with optional ramps")
    trace: Trace | None = Field(None, description="arrivals: trace reads arrivals from here")
    burst_size: int = Field(100, ge=1, le=MAX_WORKERS,
                            description="jobs per burst (arrivals: burst)")
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
        if (self.arrivals == "trace") != (self.trace is not None):
            field = "trace" if self.trace is None else "arrivals"
            raise FieldError(field, "arrivals: trace and a workload.trace go together")
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
        if self.rate is None and self.trace is None:
            raise FieldError("rate", "required field is missing (or give a "
                                              "profile or a trace)")
        return self

    def profile_rates(self) -> list[float]:
        """Every rate the profile reaches (the base rate without one)."""
        return [step.rate for step in self.profile] or [self.rate]


class Autoscale(Section):
    """Workers added and removed as KEDA (queue_depth) or the HPA (busy_fraction) would."""

    metric: Literal["queue_depth", "busy_fraction"]
    target: float = Field(gt=0, description="queue_depth: jobs queued per worker; "
                                            "busy_fraction: the busy fraction aimed at")
    min: int = Field(1, ge=1, le=MAX_WORKERS)
    max: int = Field(ge=1, le=MAX_WORKERS)
    interval: Period = Field(15.0, description="how often the autoscaler decides")
    step_limit: int | None = Field(None, ge=1, le=MAX_WORKERS,
                                   description="workers added or removed per decision at "
                                               "most")
    cooldown: NonNegativeDuration = Field(
        0.0, description="no scale-in until this long after the last scaling")

    @model_validator(mode="after")
    def _ordered(self) -> Autoscale:
        if self.min > self.max:
            raise FieldError("min", f"min ({self.min}) is above max "
                                                      f"({self.max})")
        if self.metric == "busy_fraction" and self.target > 1:
            raise FieldError("target",
                             "busy_fraction: the target is a fraction in (0, 1]")
        return self


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
    attempt_overhead: Annotated[NonNegativeDuration, GatesCalls()] = Field(
        0.0, description="what one attempt costs the client before the call leaves")


class Service(Section):
    distribution: Literal["constant", "exponential", "lognormal"] = "exponential"
    mean: PositiveDuration = 0.1
    sigma: float = Field(0.5, gt=0, le=10, description="lognormal shape (std-dev of log)")


class Outage(Section):
    start: NonNegativeDuration
    duration: PositiveDuration
    mode: Literal["down", "blackhole", "error", "slow"] = "down"
    error_rate: float = Field(1.0, gt=0, le=1, description="mode error: fraction failing")
    factor: float = Field(5.0, gt=0, description="mode slow: service-time multiplier")

    @property
    def end(self) -> float:
        return self.start + self.duration


class RateLimit(Section):
    rate: float = Field(gt=0, description="calls per second")
    burst: float = Field(100.0, ge=1, description="bucket size, calls")


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


class Occ(Section):
    """The optimistic-concurrency row (``downstream.model: occ``; the model:
    herdsim/model/downstream/occ.py)."""

    hop_mean: PositiveDuration = 0.010
    hop_sd: NonNegativeDuration = 0.002
    first_attempt: int = Field(0, ge=0, le=MAX_RETRIES,
                               description="attempt the strategy sees at the first retry (1: "
                                           "the AWS 2015 simulator)")


class Codel(Section):
    """Facebook's CoDel for the waiting room ("Fail at Scale")."""

    target: PositiveDuration = Field(0.005, description="a call waiting longer is rejected "
                                                        "once the room stands")
    interval: PositiveDuration = Field(0.1, description="the room stands when it has not been "
                                                        "empty for this long")


class Shedding(Section):
    """Probabilistic shedding beyond a waiting-room depth (Metafor's throttling server)."""

    above: int = Field(ge=0, description="waiting calls from which arrivals are shed")
    probability: Fraction = Field(description="chance of admitting a call beyond that depth")


class Downstream(Section):
    model: Literal["queue", "occ"] = "queue"
    concurrency: int = Field(100, ge=1, le=MAX_WORKERS)
    queue_limit: int | None = Field(None, ge=0, description="waiting room; null = unbounded")
    service: Service = Service()
    timeout: PositiveDuration | None = None
    network_delay: Service | None = None
    request_delay: Service | None = Field(
        None, description="time a call spends on the way to the server (network_delay is the "
                          "way back)")
    serve_abandoned: bool = False
    rate_limit: RateLimit | None = None
    retry_after: RetryAfter | None = Field(
        None, description="Retry-After sent with throttled and rejected answers: a duration, "
                          "or limiter (until the rate limiter next has a token)")
    outages: list[Outage] = []
    overload: Overload = Overload()
    occ: Occ = Occ()
    discipline: Literal["fifo", "lifo", "adaptive_lifo"] = Field(
        "fifo", description="the waiting room's order; adaptive_lifo: FIFO until "
                            "lifo_threshold calls wait, then LIFO")
    lifo_threshold: int | None = Field(None, ge=1, description="adaptive_lifo: the depth "
                                                               "from which the room is LIFO")
    codel: Codel | None = None
    shedding: Shedding | None = None
    admission: limiters.Admission | None = None

    @model_validator(mode="after")
    def _threshold_with_adaptive_lifo(self) -> Downstream:
        if (self.discipline == "adaptive_lifo") != (self.lifo_threshold is not None):
            raise FieldError("lifo_threshold",
                             "is required by discipline: adaptive_lifo, and only by it")
        if self.retry_after == "limiter" and self.rate_limit is None:
            raise FieldError("retry_after", "retry_after: limiter needs a rate_limit")
        return self

    def defends(self) -> bool:
        """Whether the downstream defends itself (a discipline, CoDel, shedding or an
        admission limit): then its admission runs the general path."""
        return (self.discipline != "fifo" or self.codel is not None
                or self.shedding is not None or self.admission is not None)

    def mean_service(self) -> float:
        """Mean service time at full concurrency (latency_per_call included)."""
        return self.service.mean + self.overload.latency_per_call * self.concurrency

    def capacity_rate(self) -> float:
        """Calls per second the downstream can serve when healthy."""
        capacity = self.concurrency / self.mean_service()
        if self.rate_limit is not None:
            capacity = min(capacity, self.rate_limit.rate)
        return capacity


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
                and not strategies.is_own(self.strategy):
            if not strategies.is_import_path(self.strategy) \
                    and self.strategy not in strategies.installed():
                raise FieldError("strategy", strategies.unknown(self.strategy))
            self._untrusted = True  # code named by a file being read: a name, not resolved
            return self
        try:
            self.build()
        except strategies.ParamsError as exc:
            raise FieldError("params", str(exc)) from None
        except (ValueError, StrategyError) as exc:
            raise FieldError("strategy", str(exc)) from None
        return self

    def build(self, throttling: bool = False) -> strategies.Strategy:
        """The strategy object this section describes (never one read untrusted); with
        *throttling*, the one that draws after a throttling answer (``throttling_base``)."""
        if self._untrusted:
            raise ValueError(f"strategy {self.strategy!r} was read from a file without "
                             "importing it (a strategy named by an import path is code)")
        base = self.throttling_base if throttling and self.throttling_base else self.base
        return strategies.build(self.strategy, base, self.cap, self.params)


class DLQ(Section):
    enabled: bool = True
    redelivery_delay: PositiveDuration = Field(
        1.0, description="DLQ off: a failed job is visible on the main queue again after this"
    )


class Breaker(Section):
    """A circuit breaker (Resilience4j/Polly semantics)."""

    enabled: Annotated[bool, GatesCalls()] = False
    scope: Literal["worker", "pool", "client"] = "worker"
    retries_only: bool = False
    failure_rate_threshold: float = Field(0.4, gt=0, le=1)
    window: Period = 30.0
    window_calls: int | None = Field(None, ge=1, le=MAX_WORKERS,
                                     description="count-based window instead")
    minimum_calls: int = Field(20, ge=1, le=MAX_WORKERS)
    slow_call_threshold: PositiveDuration | None = None
    slow_call_rate_threshold: float = Field(1.0, gt=0, le=1)
    open_duration: PositiveDuration = 10.0
    open_duration_multiplier: float = Field(1.0, ge=1)
    max_open_duration: PositiveDuration | None = None
    half_open_calls: int = Field(3, ge=1, le=MAX_WORKERS)
    resume_jitter: NonNegativeDuration = Field(
        0.0, description="queue workers held by the breaker resume U(0, this) after it lets go")


_TOKEN_FIELDS = ("capacity", "retry_cost", "timeout_cost", "failure_cost", "success_refund",
                 "refund_retry_cost", "floor", "strict")


class Budget(Section):
    """A retry budget or client-side throttle (see herdsim/policies/budget.py)."""

    kind: Literal["token_bucket", "adaptive", "ratio", "cumulative_ratio"]
    scope: Literal["worker", "pool", "client"] = "pool"
    preset: Literal["aws", "aws-1.43", "grpc"] | None = None
    capacity: float | None = Field(None, gt=0, description="tokens (token_bucket)")
    retry_cost: float | None = Field(None, ge=0)
    timeout_cost: float | None = Field(None, ge=0)
    throttling_cost: float | None = Field(
        None, ge=0, description="token_bucket: a retry's cost after a throttling answer (a "
                                "429); unset: retry_cost, or the preset's")
    failure_cost: float | None = Field(None, ge=0)
    success_refund: float | None = Field(None, ge=0)
    credit_on: Literal["success", "first_try"] = Field(
        "success", description="token_bucket: success_refund earned per success or per first try")
    refund_retry_cost: bool | None = None
    floor: float | None = Field(None, ge=0, lt=1, description="fraction of capacity kept")
    strict: bool | None = None
    window: Period | None = None
    k: float = Field(2.0, gt=0, description="adaptive: accepts multiplier K")
    ratio: float | None = Field(None, gt=0, le=1, description="ratio: retries per first try "
                                "(0.2); cumulative_ratio: failures per first try (0.1)")
    min_per_second: float = Field(10.0, ge=0, description="ratio: retries always allowed")

    @model_validator(mode="after")
    def _complete(self) -> Budget:
        if self.kind == "token_bucket" and self.preset is None:
            missing = [f for f in _TOKEN_FIELDS if getattr(self, f) is None]
            if missing:
                raise FieldError(
                    missing[0],
                    "a token_bucket needs preset: aws|aws-1.43|grpc or every one of "
                    + ", ".join(_TOKEN_FIELDS),
                )
        if self.credit_on != "success" and self.kind != "token_bucket":
            raise FieldError("credit_on", "credit_on applies to kind: token_bucket")
        if self.window is None:
            self.window = 120.0 if self.kind == "adaptive" else 10.0
        if self.ratio is None:
            self.ratio = 0.1 if self.kind == "cumulative_ratio" else 0.2
        return self

    def token_params(self) -> dict:
        """The token-bucket fields set explicitly (they override the preset)."""
        return {f: getattr(self, f) for f in (*_TOKEN_FIELDS, "throttling_cost")
                if getattr(self, f) is not None}


class ClientLimiter(Section):
    """A client-side rate limiter before every attempt: botocore's adaptive mode (see
    herdsim/policies/adaptive.py)."""

    kind: Literal["aws_adaptive"] = "aws_adaptive"
    scope: Literal["worker", "pool", "client"] = Field(
        "pool", description="pool: one client shared by every worker (a boto3 client "
                            "shared by threads); worker: one each; client: per open-loop "
                            "client")

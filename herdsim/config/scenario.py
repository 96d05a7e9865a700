"""Scenario files: YAML in, a validated :class:`Scenario` out.

Every field is documented in ``docs/scenarios.md``. Durations accept ``250ms``, ``10s``,
``2m`` or a number of seconds. Overrides (``--set a.b=c``) go through the same validation.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from herdsim.config import arguments, files
from herdsim.config import trace as traces
from herdsim.config.durations import format_duration, parse_duration
from herdsim.config.schema import GatesCalls, model_at, section_type
from herdsim.errors import ScenarioError, StrategyError, UsageError
from herdsim.policies import presets, strategies

RESOLUTION = 1e-6  # 1us: a period repeated over a run must advance the clock


def number_text(value: float) -> str:
    """A number in a message, however large (``10**400`` has no float form)."""
    if isinstance(value, int) and len(digits := str(abs(value))) > 15:
        return f"{'-' if value < 0 else ''}{digits[:3]}… ({len(digits)} digits)"
    return f"{value:g}"


def _resolvable(seconds: float) -> float:
    if 0 < seconds < RESOLUTION:
        raise ValueError(f"{seconds:g} s is below 1us, herdsim's time resolution")
    return seconds


PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
Period = Annotated[PositiveDuration, AfterValidator(_resolvable)]  # a step repeated all run
NonNegativeDuration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


def _retry_after(value: object) -> object:
    """``limiter`` as it is, anything else a duration >= 0."""
    if value == "limiter":
        return value
    seconds = parse_duration(value)
    if seconds < 0:
        raise ValueError(f"expected a duration >= 0 or limiter, got {value!r}")
    return seconds


RetryAfter = Annotated[float | Literal["limiter"], BeforeValidator(_retry_after)]


LIMIT = 1e9  # no number that sizes a run (seconds, rates, counts) may exceed this
MAX_NAME = 100  # characters of a scenario name (it names output directories)
MAX_NODES = 100_000  # YAML nodes of one scenario, aliases expanded (a "billion laughs" guard)
_UNBOUNDED = frozenset({"seed"})


def _admits_bool(annotation: Any) -> bool:
    """True when *annotation* (``bool``, ``bool | None``, ``Any`` …) accepts a boolean."""
    if annotation is bool or annotation is Any:
        return True
    return any(_admits_bool(arg) for arg in getattr(annotation, "__args__", ()))


def _printable(text: str, what: str) -> str:
    """*text* unless it holds control characters (ANSI escapes, newlines, NUL …)."""
    bad = next((ch for ch in text if not ch.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{what} holds the control character {bad!r}")
    return text


class Section(BaseModel):
    """Base of every section: unknown fields, NaN/inf, booleans given for numbers and
    numbers beyond :data:`LIMIT` are refused in one place, for every field."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if not _admits_bool(annotation) and annotation is not str:
                raise ValueError("expected a number, not a boolean")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _bounded(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and info.field_name not in _UNBOUNDED and abs(value) > LIMIT:
            raise ValueError(f"{number_text(value)} is beyond {LIMIT:g}, the largest number "
                             "herdsim accepts for a duration, rate or count")
        return value


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


class Workload(Section):
    arrivals: Literal["poisson", "constant", "burst", "trace"] = "poisson"
    rate: float = Field(  # type: ignore[assignment]  # None until the load fills it in
        None, gt=0, description="jobs per second (a profile's first step or a trace's mean "
                                "by default)")
    profile: list[Step] = Field([], description="piecewise rates, with optional ramps")
    trace: Trace | None = Field(None, description="arrivals: trace reads arrivals from here")
    burst_size: int = Field(100, ge=1, description="jobs per burst (arrivals: burst)")
    backlog: int = Field(0, ge=0, description="jobs already queued at t=0")
    poison_fraction: Fraction = 0.0
    queue_limit: int | None = Field(None, ge=1, description="main-queue length limit")
    spikes: list[Spike] = []

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if (self.arrivals == "trace") != (self.trace is not None):
            field = "workload.trace" if self.trace is None else "workload.arrivals"
            raise _FieldError(field, "arrivals: trace and a workload.trace go together")
        if self.profile and self.trace is not None:
            raise _FieldError("workload.profile", "a profile and a trace both set the rate; "
                                                  "give one")
        steps = self.profile
        if steps:
            if steps[0].at != 0 or steps[0].ramp:
                raise _FieldError("workload.profile.0",
                                  "the first step starts at 0s with no ramp (it is the base "
                                  "rate)")
            if steps[0].rate <= 0:
                raise _FieldError("workload.profile.0.rate",
                                  "the first step's rate (the base rate) must be > 0")
            for i in range(1, len(steps)):
                if steps[i].at <= steps[i - 1].at:
                    raise _FieldError(f"workload.profile.{i}.at",
                                      "steps must come in time order, each after the last")
                if steps[i - 1].at + steps[i - 1].ramp > steps[i].at:
                    raise _FieldError(f"workload.profile.{i - 1}.ramp",
                                      "the ramp runs past the next step's at")
            if self.rate is None:
                self.rate = steps[0].rate
        if self.rate is None and self.trace is None:
            raise _FieldError("workload.rate", "required field is missing (or give a "
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
    min: int = Field(1, ge=1)
    max: int = Field(ge=1)
    interval: Period = Field(15.0, description="how often the autoscaler decides")
    step_limit: int | None = Field(None, ge=1, description="workers added or removed per "
                                                           "decision at most")
    cooldown: NonNegativeDuration = Field(
        0.0, description="no scale-in until this long after the last scaling")

    @model_validator(mode="after")
    def _ordered(self) -> Autoscale:
        if self.min > self.max:
            raise _FieldError("workers.autoscale.min", f"min ({self.min}) is above max "
                                                       f"({self.max})")
        if self.metric == "busy_fraction" and self.target > 1:
            raise _FieldError("workers.autoscale.target",
                              "busy_fraction: the target is a fraction in (0, 1]")
        return self


class Workers(Section):
    count: Annotated[int | None, GatesCalls(lambda count: count is not None)] = Field(
        100, ge=1, description="null = open loop: a caller per job (with autoscale: the "
                               "count at t=0)")
    autoscale: Annotated[Autoscale | None, GatesCalls()] = None
    clients: int | None = Field(None, ge=1, description="open loop: arrivals spread uniformly "
                                                         "over this many clients")
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
    first_attempt: int = Field(0, ge=0, description="attempt the strategy sees at the first "
                                                     "retry (1: the AWS 2015 simulator)")


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


ADMISSION_FIELDS: dict[str, tuple[str, ...]] = {  # the fields each kind reads
    "fixed": ("limit",),
    "aimd": ("initial_limit", "min_limit", "max_limit", "backoff_ratio", "timeout",
             "windowed"),
    "vegas": ("initial_limit", "max_limit", "smoothing", "probe_multiplier", "windowed"),
    "gradient2": ("initial_limit", "min_limit", "max_limit", "smoothing", "queue_size",
                  "long_window", "rtt_tolerance", "windowed"),
    "envoy": ("interval", "min_rtt_interval", "request_count", "jitter", "min_concurrency",
              "buffer", "max_concurrency", "percentile"),
}


class Admission(Section):
    """An adaptive (or fixed) limit on calls admitted: in service plus waiting. Fields left
    out take the library's defaults (docs/mitigations.md)."""

    kind: Literal["fixed", "aimd", "vegas", "gradient2", "envoy"]
    status: Literal[503, 429] = Field(503, description="the answer to a call over the limit")
    limit: int | None = Field(None, ge=1, description="fixed: the limit")
    initial_limit: int | None = Field(None, ge=1)
    min_limit: int | None = Field(None, ge=0)
    max_limit: int | None = Field(None, ge=1)
    backoff_ratio: float | None = Field(None, ge=0.5, lt=1)
    timeout: PositiveDuration | None = Field(None, description="aimd: an rtt above it backs off")
    smoothing: float | None = Field(None, gt=0, le=1)
    probe_multiplier: int | None = Field(None, ge=1)
    queue_size: int | None = Field(None, ge=0)
    long_window: int | None = Field(None, ge=1)
    rtt_tolerance: float | None = Field(None, ge=1)
    windowed: bool | None = Field(None, description="Netflix WindowedLimit (1 s, 10 samples); "
                                                    "default: only for gradient2")
    interval: PositiveDuration | None = Field(None, description="envoy: "
                                              "concurrency_update_interval (100 ms)")
    min_rtt_interval: PositiveDuration | None = Field(None, description="envoy: minRTT "
                                                      "re-measured this often (60 s)")
    request_count: int | None = Field(None, ge=1)
    jitter: Fraction | None = None
    min_concurrency: int | None = Field(None, ge=1)
    buffer: float | None = Field(None, ge=0)
    max_concurrency: int | None = Field(None, ge=1)
    percentile: Fraction | None = None

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> Admission:
        allowed = ADMISSION_FIELDS[self.kind]
        for name in type(self).model_fields:
            if name not in ("kind", "status") and name not in allowed \
                    and getattr(self, name) is not None:
                raise _FieldError(f"downstream.admission.{name}",
                                  f"does not apply to kind: {self.kind} (it reads "
                                  + ", ".join(allowed) + ")")
        if self.kind == "fixed" and self.limit is None:
            raise _FieldError("downstream.admission.limit", "kind: fixed needs a limit")
        return self

    def params(self) -> dict[str, Any]:
        """The fields of this kind, None where the library's default applies."""
        return {name: getattr(self, name) for name in ADMISSION_FIELDS[self.kind]}


class Downstream(Section):
    model: Literal["queue", "occ"] = "queue"
    concurrency: int = Field(100, ge=1)
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
    admission: Admission | None = None

    @model_validator(mode="after")
    def _threshold_with_adaptive_lifo(self) -> Downstream:
        if (self.discipline == "adaptive_lifo") != (self.lifo_threshold is not None):
            raise _FieldError("downstream.lifo_threshold",
                              "is required by discipline: adaptive_lifo, and only by it")
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
    burst: int = Field(ge=1, description="bucket size (full at the start)")


class Retry(Section):
    preset: str | None = Field(None, description="a library's policy as shipped "
                                                 "(herdsim presets); fields set here win")
    strategy: str = "exponential"
    base: Period = 0.1
    cap: PositiveDuration = 30.0
    max_retries: int | None = Field(5, ge=0)
    poison_retryable: bool = True
    params: dict[str, Any] = {}
    retry_after: Annotated[Literal["ignore", "use", "at_least"], GatesCalls()] = Field(
        "ignore", description="a server's Retry-After: ignore it, sleep it, or sleep at least it")
    retry_after_limit: PositiveDuration | None = Field(
        None, description="at_least: the Retry-After lengthens the policy's sleep by at most "
                          "this (botocore: 5 s)")
    throttling_base: Annotated[PositiveDuration | None, GatesCalls()] = Field(
        None, description="the base after a throttling answer (a 429: rate limited or "
                          "rejected) when it differs from base (botocore: 1 s, base 50 ms)")
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
                raise _FieldError("retry.preset", str(exc)) from None
        if self.cap < self.base:
            raise _FieldError(
                "retry.cap",
                f"cap ({format_duration(self.cap)}) is below base ({format_duration(self.base)})",
            )
        if self.throttling_base is not None and self.cap < self.throttling_base:
            raise _FieldError(
                "retry.throttling_base",
                f"throttling_base ({format_duration(self.throttling_base)}) is above cap "
                f"({format_duration(self.cap)})")
        if self.retry_after_limit is not None and self.retry_after != "at_least":
            raise _FieldError("retry.retry_after_limit",
                              "retry_after_limit applies to retry_after: at_least")
        if not (info.context or {}).get("trust_code", True) \
                and not strategies.is_own(self.strategy):
            if not strategies.is_import_path(self.strategy) \
                    and self.strategy not in strategies.installed():
                raise _FieldError("retry.strategy", strategies.unknown(self.strategy))
            self._untrusted = True  # code named by a file being read: a name, not resolved
            return self
        try:
            self.build()
        except strategies.ParamsError as exc:
            raise _FieldError("retry.params", str(exc)) from None
        except (ValueError, StrategyError) as exc:
            raise _FieldError("retry.strategy", str(exc)) from None
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
    window_calls: int | None = Field(None, ge=1, description="count-based window instead")
    minimum_calls: int = Field(20, ge=1)
    slow_call_threshold: PositiveDuration | None = None
    slow_call_rate_threshold: float = Field(1.0, gt=0, le=1)
    open_duration: PositiveDuration = 10.0
    open_duration_multiplier: float = Field(1.0, ge=1)
    max_open_duration: PositiveDuration | None = None
    half_open_calls: int = Field(3, ge=1)
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
                raise _FieldError(
                    f"budget.{missing[0]}",
                    "a token_bucket needs preset: aws|aws-1.43|grpc or every one of "
                    + ", ".join(_TOKEN_FIELDS),
                )
        if self.credit_on != "success" and self.kind != "token_bucket":
            raise _FieldError("budget.credit_on", "credit_on applies to kind: token_bucket")
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


class Scenario(Section):
    """A whole simulation: what arrives, who works, what they call, how they retry."""

    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str = ""
    seed: int = Field(0, ge=0)
    duration: PositiveDuration
    bin: PositiveDuration = 0.1
    peak_window: Period = 0.01
    queue: str | None = None
    workload: Workload
    workers: Workers = Workers()
    downstream: Downstream = Downstream()
    retry: Retry = Retry()
    dlq: DLQ = DLQ()
    breaker: Breaker = Breaker()
    budget: Annotated[Budget | None, GatesCalls()] = None
    client_limiter: Annotated[ClientLimiter | None, GatesCalls()] = None

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        _printable(name, "the name")
        if "/" in name or "\\" in name or name.strip(". ") == "" or name.startswith("."):
            raise ValueError(f"{name!r} cannot name an output directory: no '/', '\\', "
                             "leading '.' or bare dots")
        return name

    @field_validator("queue")
    @classmethod
    def _label_value(cls, queue: str | None) -> str | None:
        if queue is not None and not queue.strip():
            raise ValueError("an empty queue label is no label to Prometheus; "
                             "omit it to use the name")
        return None if queue is None else _printable(queue, "the queue label")

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.queue is None:
            self.queue = self.name

        if self.bin < 1e-3:
            raise _FieldError("bin", f"bin ({format_duration(self.bin)}) is below 1ms: figures "
                                     "and the Prometheus export sample at millisecond "
                                     "resolution")
        if self.bin > self.duration:
            raise _FieldError("bin", f"bin ({format_duration(self.bin)}) is longer than "
                                     f"duration ({format_duration(self.duration)})")
        for i, outage in enumerate(self.downstream.outages):
            if outage.end > self.duration:
                raise _FieldError(
                    f"downstream.outages.{i}",
                    f"outage ends at {format_duration(outage.end)}, after the run's "
                    f"end ({format_duration(self.duration)})",
                )
            if outage.mode == "blackhole" and self.downstream.timeout is None:
                raise _FieldError(
                    f"downstream.outages.{i}.mode",
                    "a blackhole outage needs downstream.timeout (calls hang until it)",
                )
        clients = self.workers.clients is not None
        if clients and self.workers.count is not None:
            raise _FieldError("workers.clients",
                              "clients group open-loop callers: set workers.count: null")
        for section, mitigation in (("breaker", self.breaker if self.breaker.enabled else None),
                                    ("budget", self.budget),
                                    ("client_limiter", self.client_limiter)):
            if mitigation is not None and mitigation.scope == "client" and not clients:
                raise _FieldError(f"{section}.scope",
                                  "scope client needs workers.clients (open-loop callers "
                                  "grouped into clients)")
        if self.workers.count is None:
            if self.workers.retry_mode == "requeue":
                raise _FieldError("workers.retry_mode",
                                  "open-loop callers (workers.count: null) have no queue to "
                                  "requeue to; use sleep")
            if self.breaker.enabled and self.breaker.scope == "worker":
                raise _FieldError("breaker.scope",
                                  "open-loop callers share one breaker: use scope: pool "
                                  "(or client, with workers.clients)")
            if self.client_limiter is not None and self.client_limiter.scope == "worker":
                raise _FieldError("client_limiter.scope",
                                  "open-loop callers share one client: use scope: pool "
                                  "(or client, with workers.clients)")
            if self.budget is not None and self.budget.scope == "worker":
                raise _FieldError("budget.scope",
                                  "open-loop callers share one budget: use scope: pool "
                                  "(or client, with workers.clients)")
        if self.downstream.retry_after == "limiter" and self.downstream.rate_limit is None:
            raise _FieldError("downstream.retry_after",
                              "retry_after: limiter needs downstream.rate_limit")
        if self._may_freeze():
            raise _FieldError(
                "workers.attempt_overhead",
                f"retry.strategy {self.retry.strategy!r} may retry at once and retries are "
                "unlimited: against a fast failure simulated time would stand still; set "
                "workers.attempt_overhead (what one attempt costs the client, e.g. 1ms)")
        scaling = self.workers.autoscale
        if scaling is not None:
            if self.workers.count is None:
                raise _FieldError("workers.autoscale", "open-loop callers are not a pool to "
                                                       "scale; set workers.count")
            if not scaling.min <= self.workers.count <= scaling.max:
                raise _FieldError("workers.count", f"{self.workers.count} workers at t=0 is "
                                                   f"outside autoscale's min..max "
                                                   f"({scaling.min}..{scaling.max})")
            if self.downstream.model == "occ":
                raise _FieldError("workers.autoscale", "the occ model has no queue workers "
                                                       "to scale")
        if self.downstream.model == "occ" and self.workers.count is None:
            raise _FieldError("workers.count", "the occ model needs a number of clients")
        previous_end = None
        for i, spike in sorted(enumerate(self.workload.spikes), key=lambda item: item[1].at):
            if spike.at >= self.duration:
                raise _FieldError(f"workload.spikes.{i}.at", "spike starts after the run's end")
            if previous_end is not None and spike.at < previous_end:
                raise _FieldError(f"workload.spikes.{i}.at",
                                  "spikes overlap; give each window its own rate")
            previous_end = spike.at + spike.duration
        return self

    def _may_freeze(self) -> bool:
        """Could a job retry forever at one instant? A zero-wait strategy (``min_sleep``
        0), unlimited retries, nothing that costs time per attempt (overhead, network, a
        poller), and something that fails fast (down, 429, a full waiting room, a crash,
        an open-loop caller's open breaker)."""
        ds, workers = self.downstream, self.workers
        if self.retry._untrusted:  # read, not run: its code is never imported
            return False
        if (getattr(self.retry.build(), "min_sleep", None) != 0.0
                or self.retry.max_retries is not None or workers.attempt_overhead
                or ds.network_delay is not None or ds.request_delay is not None
                or (workers.count is not None and workers.retry_mode == "requeue")):
            return False
        return (any(o.mode == "down" for o in ds.outages) or ds.rate_limit is not None
                or ds.defends()
                or ds.queue_limit is not None or ds.overload.collapse is not None
                or (workers.count is None and self.breaker.enabled))

    @property
    def outage_windows(self) -> list[tuple[float, float]]:
        return [(o.start, o.end) for o in self.downstream.outages]

    @property
    def first_outage_start(self) -> float | None:
        """When the first outage starts (None without an outage)."""
        return min((o.start for o in self.downstream.outages), default=None)

    @property
    def last_outage_end(self) -> float | None:
        """When the last outage ends (None without an outage)."""
        return max((o.end for o in self.downstream.outages), default=None)

    def to_dict(self) -> dict:
        """Plain data (seconds as numbers), ready for YAML or JSON."""
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


class _FieldError(ValueError):
    """A cross-field problem that knows which field to blame."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"])
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, _FieldError):
            field, message = cause.field, str(cause)
        else:
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown field" + _suggest(field)
            elif err["type"] == "missing":
                message = "required field is missing"
            elif "input" in err and not isinstance(err["input"], (dict, list)) \
                    and f"got {err['input']!r}" not in message:
                shown = repr(err["input"])
                message += f" (got {shown if len(shown) <= 80 else shown[:79] + '…'})"
        problems.append((field, message))
    return problems


def _suggest(field: str) -> str:
    parts = field.split(".")
    model = model_at(Scenario, ".".join(parts[:-1]))
    if model is None:
        return ""
    close = difflib.get_close_matches(parts[-1], list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def validate(data: Any, source: str | None = None, trust_code: bool = True) -> Scenario:
    """Validate plain data (as parsed from YAML) into a :class:`Scenario`.

    ``trust_code=False`` keeps a ``retry.strategy: module:Class`` as a name without
    importing it (for readers of someone else's files).
    """
    if not isinstance(data, dict):
        raise ScenarioError([("", "a scenario must be a mapping of sections")], source)
    fill_preset(data, source)
    try:
        scenario = Scenario.model_validate(data, context={"trust_code": trust_code})
    except ValidationError as exc:
        raise ScenarioError(_problems(exc), source) from None
    trace = scenario.workload.trace
    if trace is not None and (trust_code or trace.sha256 is None):
        try:
            read_trace(scenario, Path(source).parent if source else Path())
        except ScenarioError as exc:
            raise ScenarioError(exc.problems, source) from None
    return scenario


def read_trace(scenario: Scenario, base: Path) -> None:
    """Resolve the trace's path (relative to *base*, the scenario's folder), read it once
    (streamed) and record its absolute path and SHA-256; a recorded SHA-256 must match.
    (Readers of a run folder, ``trust_code=False``, take a recorded trace's values unread:
    the folder stays readable when the trace has moved.)"""
    trace = scenario.workload.trace
    if trace is None:
        return
    path = Path(trace.file).expanduser()
    path = (path if path.is_absolute() else base / path).resolve()
    found = traces.scan(path, trace.format, trace.time_scale, trace.start, scenario.duration)
    if trace.sha256 is not None and trace.sha256 != found.sha256:
        raise ScenarioError([("workload.trace.sha256",
                              f"{path} has changed since it was recorded (SHA-256 "
                              f"{found.sha256[:12]}…, recorded {trace.sha256[:12]}…): this run "
                              "cannot be reproduced from it")])
    if found.within == 0:
        raise ScenarioError([("workload.trace.file",
                              f"{path}: no arrival falls within the run "
                              f"({format_duration(scenario.duration)})")])
    trace.file = str(path)
    trace.sha256 = found.sha256
    if scenario.workload.rate is None:
        scenario.workload.rate = found.within / scenario.duration


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping, and reading whole
    numbers as YAML 1.2 does (``017`` is seventeen, not YAML 1.1's octal fifteen)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node)).replace("_", "")
        digits = text.lstrip("+-")
        if len(digits) > 1 and digits.startswith("0") and digits.isdigit():
            return int(text, 10)
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, f"a mapping key must be a plain value, got {key!r}",
                    key_node.start_mark) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark)
        return super().construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_implicit_resolver(  # 08 and 09: YAML 1.1 makes them text
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?0[0-9_]+$"), list("-+0"))


def _count_nodes(data: Any, budget: int = MAX_NODES) -> None:
    """Refuse documents whose values (aliases expanded) exceed *budget* nodes."""
    stack, count = [data], 0
    while stack:
        item = stack.pop()
        count += 1
        if count > budget:
            raise ScenarioError([("", f"more than {budget:,} values (aliases expanded); "
                                      "not a scenario")])
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_yaml(text: str) -> Any:
    """Parse YAML *text* (duplicate keys refused); raise ``ValueError`` with a one-line
    reason naming the line and column."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"YAML syntax error at {where}{problem}") from None
    except RecursionError:
        raise ValueError("YAML nested too deeply") from None
    _count_nodes(data)
    return data


def read_text(path: Path) -> str:
    """The UTF-8 text of a scenario file; a clear ``ValueError`` for binary files, UTF-16
    and other encodings."""
    raw = files.read_bytes(path, files.SCENARIO_LIMIT)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError("the file is UTF-16; save it as UTF-8")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                         f"{exc.start}); save it as UTF-8") from None
    if "\x00" in text:
        raise ValueError("a binary file (it holds NUL bytes), not a YAML scenario")
    return text


def fill_preset(data: dict, source: str | None = None) -> None:
    """Fill the fields ``retry.preset`` sets and *data* leaves out (see
    :mod:`herdsim.policies.presets`)."""
    retry = data.get("retry")
    name = retry.get("preset") if isinstance(retry, dict) else None
    if name is None:
        return
    try:
        preset = presets.get(name)
    except ValueError as exc:
        raise ScenarioError([("retry.preset", str(exc))], source) from None
    for path, value in preset.fields.items():
        *parents, leaf = path.split(".")
        node = data
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if leaf not in node:
            node[leaf] = value.copy() if isinstance(value, dict) else value


def _strip_preset_fields(data: dict, names: list[Any]) -> None:
    """Remove the fields the presets *names* control, so a new preset fills them."""
    for name in names:
        if name not in presets.PRESETS:
            continue
        for path in presets.get(name).fields:
            *parents, leaf = path.split(".")
            node = data
            for part in parents:
                node = node.get(part) if isinstance(node, dict) else None  # type: ignore[assignment]
            if isinstance(node, dict):
                node.pop(leaf, None)


def apply_overrides(data: dict, overrides: dict[str, Any] | None) -> dict:
    """Set dotted paths (``retry.strategy``, ``downstream.outages.0.duration``) in *data*.

    Values given as strings are parsed as YAML scalars (``null``, ``3``, ``true``, ``2s``).
    A path that names no field of the scenario raises :class:`ScenarioError`.
    ``retry.preset`` goes first and replaces the fields the old and the new preset
    control; the other overrides then win over the preset.
    """
    overrides = dict(overrides or {})

    def parsed(path: str, raw: Any) -> Any:
        try:
            return parse_yaml(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            raise ScenarioError([(path, f"--set value {raw!r} is not YAML: {exc}")]) from None

    if "retry.preset" in overrides:
        value = parsed("retry.preset", overrides.pop("retry.preset"))
        retry = data.get("retry") if isinstance(data.get("retry"), dict) else {}
        _strip_preset_fields(data, [retry.get("preset"), value])  # type: ignore[union-attr]  # a dict
        _set_path(data, "retry.preset", value)
    for path, raw in overrides.items():
        value = parsed(path, raw)
        if isinstance(value, str) and value == "":
            value = raw
        _set_path(data, path, value)
    return data


_FREE_FORM = object()  # marks a dict field (e.g. retry.params) whose keys are the user's


def _set_path(data: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    if not all(parts):
        raise ScenarioError([(path, "not a field path (expected a.b.c)")])
    model: Any = Scenario
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError([(path, f"no list item {part!r} (the list has {len(node)})")])
            key: Any = int(part)
        elif model is _FREE_FORM:
            key = part
        else:
            if model is None or part not in model.model_fields:
                where = ".".join(parts[:depth]) or "the scenario"
                hint = _suggest(".".join(parts[: depth + 1])) if model is not None else ""
                raise ScenarioError([(path, f"{where} has no field {part!r}{hint}")])
            key = part
            annotation = model.model_fields[part].annotation
            model = section_type(annotation) or (
                _FREE_FORM if getattr(annotation, "__origin__", None) is dict else None)
        if last:
            node[key] = value
            return
        child = node[key] if isinstance(node, list) else node.get(key)
        if child is None and parts[depth + 1].isdigit():
            raise ScenarioError([(path, f"no list item {parts[depth + 1]} (the list is empty)")])
        if child is None:
            child = node[key] = {}
        node = child


def value_text(value: Any) -> str:
    """A setting as a scenario file writes it (``None`` -> ``null``, ``True`` -> ``true``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def load_scenario(
    source: str | Path | dict, overrides: dict[str, Any] | None = None,
    trust_code: bool = True,
) -> Scenario:
    """Load a scenario from a YAML file (or a dict), apply overrides, and validate it.

    A ``retry.strategy`` that is not herdsim's own (``module:Class``, or an installed
    entry point's name) is code: it is resolved only with ``trust_code`` (the default);
    readers of output directories pass ``trust_code=False``.
    Raises :class:`ScenarioError` naming the file, the field and the problem.
    """
    label = None
    overrides = arguments.mapping("overrides", overrides)
    if not isinstance(source, (str, Path, dict)):
        raise UsageError(f"load_scenario({type(source).__name__}): expected a YAML file's "
                         "path, a bundled scenario's file, or a dict")
    if isinstance(source, dict):
        data = yaml.safe_load(yaml.safe_dump(source))
    else:
        path = Path(source)
        label = str(path)
        try:
            data = parse_yaml(read_text(path))
        except FileNotFoundError:
            raise ScenarioError([("", "no such file")], label) from None
        except IsADirectoryError:
            raise ScenarioError([("", "a directory, not a scenario file")], label) from None
        except files.NotRegularFile as exc:
            raise ScenarioError([("", f"{exc.strerror}; not a scenario file")],
                                label) from None
        except OSError as exc:
            raise ScenarioError([("", f"cannot read: {exc.strerror}")], label) from None
        except ValueError as exc:
            raise ScenarioError([("", str(exc))], label) from None
        except ScenarioError as exc:
            raise ScenarioError(exc.problems, label) from None
        if data is None:
            raise ScenarioError([("", "the file is empty")], label)
    if not isinstance(data, dict):
        raise ScenarioError([("", "a scenario must be a mapping of sections")], label)
    try:
        apply_overrides(data, overrides)
    except ScenarioError as exc:
        exc.source = label
        raise ScenarioError(exc.problems, label) from None
    return validate(data, label, trust_code)

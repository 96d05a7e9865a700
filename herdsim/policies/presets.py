"""Presets: the retry policies of the libraries people run, as shipped (pure configuration).

A preset is a set of scenario fields — strategy, base, cap, max retries, retry mode and the
system's poller, budget, breaker, dead-letter behaviour — read from the library's own
source at one release (``release``: the package and version; ``sources``: repository,
file and line at the commit read; docs/policies.md has the table). A behaviour a later
release changed stays under a name that says its version (``aws-standard-1.43``).
``k = 1`` is the first retry; herdsim's strategies see ``attempt = k - 1``.

How a preset meets a scenario (``herdsim.config.overrides``): ``retry.preset`` written in a
file fills only the fields the file leaves out; ``--set retry.preset=NAME`` (and every
arm of ``compare --presets``) replaces the fields the presets control (:data:`PATHS`) and
other ``--set`` values then override it. The zero-wait presets set
``workers.attempt_overhead`` (:data:`OVERHEAD`) so that retrying cannot freeze simulated
time against a fail-fast downstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NO_CAP = 1e9  # seconds (31 years): "the library has no cap"; listed as "none"
OVERHEAD = 0.001  # what one fail-fast attempt costs a client: see docs/policies.md

# Every path a preset controls. A section name (breaker, budget) stands for the section.
PATHS = ("retry.strategy", "retry.base", "retry.cap", "retry.max_retries", "retry.params",
         "retry.retry_after", "retry.retry_after_limit", "retry.throttling_base",
         "retry.throttling", "retry.retry_on",
         "workers.retry_mode", "workers.poll_interval",
         "workers.attempt_overhead", "dlq.enabled", "breaker", "budget", "client_limiter",
         "retry.bucket", "workers.count", "workers.autoscale")
SECTIONS = ("breaker", "budget", "client_limiter")
# The failures a client can meet (``retry.retry_on``): no answer within its timeout, a
# connection refused or reset, and the answers 500, 503 and 429. Most libraries retry them
# all; the exceptions are the presets that pass ``retry_on``.
RetryOn = Literal["timeout", "reset", 500, 503, 429]
RETRY_ON: tuple[RetryOn, ...] = ("timeout", "reset", 500, 503, 429)


@dataclass(frozen=True)
class Preset:
    """One library's policy: what it does in words, the fields it sets, the release and the
    source it was read from."""

    name: str
    library: str
    release: str  # "package version" read (a PyPI package: exactly the version pinned)
    formula: str  # the sleep before retry k (k = 1 is the first retry)
    limits: str
    fields: dict = field(repr=False)
    sources: tuple[str, ...] = ()
    differs: str = ""  # where the source disagrees with the table

    @property
    def mode(self) -> str:
        return self.fields["workers.retry_mode"]


def _fields(strategy: str, base: float, cap: float, max_retries: int | None,
            mode: str = "sleep", poll: float = 1.0, params: dict | None = None,
            retry_after: str = "ignore", overhead: float | None = None,
            breaker: dict | None = None, budget: dict | None = None,
            throttling_base: float | None = None, retry_after_limit: float | None = None,
            retry_on: tuple = RETRY_ON) -> dict:
    fields = {"retry.strategy": strategy, "retry.base": base, "retry.cap": cap,
              "retry.max_retries": max_retries, "retry.params": params or {},
              "retry.retry_after": retry_after, "retry.retry_on": list(retry_on),
              "retry.throttling": [429], "workers.retry_mode": mode,
              "workers.poll_interval": poll, "dlq.enabled": True,
              "breaker": breaker or {"enabled": False}, "budget": budget}
    if overhead is not None:
        fields["workers.attempt_overhead"] = overhead
    if throttling_base is not None:
        fields["retry.throttling_base"] = throttling_base
    if retry_after_limit is not None:
        fields["retry.retry_after_limit"] = retry_after_limit
    return fields


_PRESETS = (
    Preset(
        "sidekiq", "Sidekiq 7/8 (Ruby)",
        "sidekiq 8.1.7",
        "(k-1)^4 + 15 + randint[0, 10k) s",
        "25 retries, then the dead set; retries wait in the retry set until the scheduled-set "
        "poller (every 5 s on average) moves them back",
        _fields("sidekiq", 15.0, NO_CAP, 25, "requeue", 5.0),
        ("sidekiq/sidekiq lib/sidekiq/job_retry.rb:73,167,186,202,238,290 @1bb4aa06 (v8.1.7)",
         "sidekiq/sidekiq lib/sidekiq/scheduled.rb:150-158,182-184; config.rb:18 @1bb4aa06"),
        "the poller's period is U(2.5 s, 7.5 s) per process in Sidekiq; herdsim polls every "
        "5 s"),
    Preset(
        "celery", "Celery 5 autoretry_for, retry_backoff=True (Python)",
        "celery 5.7.0",
        "randint[0, min(600, 2^(k-1))] whole s",
        "max_retries 3, then the task fails; the retry is a new message with an ETA, "
        "fired by the worker's timer when due (herdsim polls every 10 ms)",
        _fields("celery", 1.0, 600.0, 3, "requeue", 0.01),
        ("celery 5.7.0 (PyPI) celery/utils/time.py:543-557",
         "celery 5.7.0 celery/app/autoretry.py:21-31,48-54; app/task.py:265")),
    Preset(
        "aws-standard", "botocore retry_mode=standard, botocore's default (AWS SDK for Python)",
        "botocore 1.44.8",
        "U(0,1) * min(b * 2^(k-1), 20) s, b = 1 s after a throttling answer (a 429), 50 ms "
        "otherwise; x-amz-retry-after raises it to the header's value, by at most 5 s",
        "3 attempts; retry quota 500, a retry costs 14 (5 after a throttling answer), a "
        "success refunds its retry's cost or 1",
        _fields("full_jitter", 0.05, 20.0, 2, retry_after="at_least", throttling_base=1.0,
                retry_after_limit=5.0,
                budget={"kind": "token_bucket", "preset": "aws", "scope": "pool"}),
        ("botocore 1.44.8 (PyPI) botocore/configprovider.py:29,157",
         "botocore 1.44.8 botocore/retries/standard.py:36,344-357,373-421,423-443,538-565,"
         "637-656,703-760; retries/quota.py:7"),
        "DynamoDB's non-throttling base is 25 ms and its default 4 attempts: set retry.base "
        "25ms, retry.max_retries 3. Throttling is a 429 (the rate limiter, an admission limit "
        "answering 429: standard.py:538-565); a 503 (a full waiting room, an admission limit, "
        "shedding, CoDel), a 500, a timeout and a refused or reset connection are transient "
        "errors (standard.py:463-505), as botocore sees them without an error code; S3's "
        "SlowDown, a 503 botocore reads as throttling by its code, needs retry.throttling "
        "[429, 503]. The header is herdsim's downstream.retry_after"),
    Preset(
        "aws-standard-1.43", "botocore 1.43 retry_mode=standard (AWS SDK for Python)",
        "botocore 1.43.67",
        "U(0,1) * min(2^(k-1), 20) s",
        "3 attempts; retry quota 500, a retry costs 5 (10 after a timeout), a success "
        "refunds its retry's cost or 1",
        _fields("full_jitter", 1.0, 20.0, 2,
                budget={"kind": "token_bucket", "preset": "aws-1.43", "scope": "pool"}),
        ("boto/botocore botocore/retries/standard.py:44,365-367,425-428,670-674,720-735 "
         "@0e6e2404 (1.43.67; the same default path through 1.43.127)",
         "boto/botocore botocore/retries/quota.py:7 @0e6e2404"),
        "botocore 1.44 made this path's successor the only one: kept so that an old "
        "comparison stays reproducible. In 1.43 standard was opt-in (the default was legacy)"),
    Preset(
        "aws-legacy", "botocore retry_mode=legacy (AWS SDK for Python; the default up to 1.43)",
        "botocore 1.44.8",
        "U(0,1) * 2^(k-1) s, no cap",
        "5 attempts (data/_retry.json); no quota",
        _fields("full_jitter", 1.0, NO_CAP, 4),
        ("botocore 1.44.8 (PyPI) botocore/data/_retry.json:92-97; botocore/retryhandler.py:"
         "43-63,288 (unchanged since 1.43.67 @0e6e2404)",)),
    Preset(
        "grpc-connect", "gRPC connection backoff (grpc-go)",
        "grpc-go 1.83.1",
        "k = 1: 1 s exactly; then min(1.6^(k-1), 120) s * U(0.8, 1.2)",
        "reconnects forever",
        _fields("grpc_connect", 1.0, 120.0, None),
        ("grpc/grpc-go backoff/backoff.go:47-52 @1550d9e0 (v1.83.1)",
         "grpc/grpc-go internal/backoff/backoff.go:56-75 @1550d9e0",
         "grpc/grpc doc/connection-backoff.md @08d16ee4"),
        "the first reconnect is not jittered (grpc-go returns BaseDelay for retries == 0; "
        "the spec sets current_deadline = now + INITIAL_BACKOFF)"),
    Preset(
        "grpc-retry", "gRPC retry policy (gRFC A6 example service config, grpc-go)",
        "grpc-go 1.83.1",
        "min(0.1 * 2^(k-1), 1) s * U(0.8, 1.2); server pushback: exactly its value",
        "maxAttempts 4 (capped at 5); retry throttling maxTokens 10, tokenRatio 0.1",
        _fields("proportional_jitter", 0.1, 1.0, 3, params={"jitter": 0.2},
                retry_after="use", budget={"kind": "token_bucket", "preset": "grpc",
                                           "scope": "pool"},
                retry_on=("reset", 503, 429)),
        ("grpc/proposal A6-client-retries.md:86-89,113,124,176-177,209 @1fd061ad",
         "grpc/grpc-go stream.go:767-781; dialoptions.go:43; clientconn.go:1143-1150 "
         "@1550d9e0 (v1.83.1)"),
        "gRPC has no default retry policy: these are A6's example values, retryableStatusCodes "
        "[UNAVAILABLE] among them: a refused or reset connection, a 503 and a 429 (grpc "
        "doc/http-grpc-status-mapping.md) are retried; a 500 (UNKNOWN) is not, nor a timeout "
        "(the call's deadline spans all its attempts: DEADLINE_EXCEEDED). After a pushback "
        "gRPC restarts its backoff at initialBackoff; herdsim keeps counting"),
    Preset(
        "envoy", "Envoy router retry policy",
        "envoy main branch (no release tag read)",
        "randint[0, min(25 * 2^(k-1), 250)) ms",
        "num_retries 1 (route default); base 25 ms (upstream.base_retry_backoff_ms), max "
        "10 x base; the cluster's max_retries circuit breaker: 3 retries outstanding (one "
        "proxy for the pool; a retry in its backoff is not counted)",
        _fields("envoy", 0.025, 0.25, 1, retry_on=("timeout", "reset", 500, 503),
                budget={"kind": "envoy", "scope": "pool", "max_retries": 3,
                        "max_requests": None}),
        ("envoyproxy/envoy source/common/common/backoff_strategy.cc:13-19 (current); "
         "backoff_strategy.h doubling_limit_ = max_interval_ / 2",
         "envoyproxy/envoy source/common/router/retry_state_impl.cc:78-86 @e78906c5",
         "envoyproxy/envoy api/envoy/config/route/v3/route_components.proto "
         "RetryPolicy.num_retries (defaults to 1)",
         "envoyproxy/envoy api/envoy/config/cluster/v3/circuit_breaker.proto "
         "Thresholds (max_retries 3, max_requests 1024; retry_budget unset)"),
        "a route retries nothing until retry_on names conditions (it has no default): the "
        "preset uses 5xx, which retries 5xx answers, resets, refused connections and per-try "
        "timeouts, not a 429 (that needs retriable-status-codes). Envoy's max_requests "
        "circuit breaker (1024 active) is left off: one proxy for a whole pool would refuse "
        "calls in steady state whenever more than 1024 are in flight (the stacks story has "
        "1,400), which is about sizing the proxy, not retries"),
    Preset(
        "polly", "Polly v8 RetryStrategyOptions defaults (.NET)",
        "Polly.Core 8.7.0",
        "2 s constant, no jitter",
        "3 retries",
        _fields("fixed", 2.0, 2.0, 3),
        ("App-vNext/Polly src/Polly.Core/Retry/RetryConstants.cs:9,11,15 @a824c6b9 (8.7.0)",
         "App-vNext/Polly src/Polly.Core/Retry/RetryStrategyOptions.TResult.cs:29,40,52,76 "
         "@a824c6b9")),
    Preset(
        "polly-http", "Microsoft.Extensions.Http.Resilience standard handler (.NET)",
        "Microsoft.Extensions.Http.Resilience 10.9.0",
        "DecorrelatedJitterBackoffV2, median first delay 2 s; Retry-After: exactly its value",
        "3 retries; breaker: 10% failures over 30 s, 100 calls minimum, open 5 s, one "
        "half-open probe",
        _fields("decorrelated_jitter_v2", 2.0, NO_CAP, 3, retry_after="use",
                breaker={"enabled": True, "scope": "pool", "failure_rate_threshold": 0.1,
                         "window": 30.0, "minimum_calls": 100, "open_duration": 5.0,
                         "half_open_calls": 1}),
        ("dotnet/extensions src/Libraries/Microsoft.Extensions.Http.Resilience/Polly/"
         "HttpRetryStrategyOptions.cs:30-32,46-59 @b10f9c0a (v10.9.0)",
         "App-vNext/Polly src/Polly.Core/Retry/RetryHelper.cs:75-105; RetryResilienceStrategy"
         ".cs:86-93 @a824c6b9 (8.7.0)",
         "App-vNext/Polly src/Polly.Core/CircuitBreaker/CircuitBreakerConstants.cs:13-21; "
         "Controller/CircuitStateController.cs:136-139 @a824c6b9"),
        "the handler's attempt timeout (10 s) and total timeout (30 s) are not set: use "
        "downstream.timeout"),
    Preset(
        "resilience4j", "Resilience4j Retry + CircuitBreaker defaults (Java)",
        "resilience4j 2.4.0",
        "500 ms constant",
        "3 attempts; breaker: 50% failures over the last 100 calls, 100 minimum, open 60 s, "
        "10 half-open calls, slow calls >= 60 s",
        _fields("fixed", 0.5, 0.5, 2,
                breaker={"enabled": True, "scope": "pool", "failure_rate_threshold": 0.5,
                         "window_calls": 100, "minimum_calls": 100, "open_duration": 60.0,
                         "half_open_calls": 10, "slow_call_threshold": 60.0,
                         "slow_call_rate_threshold": 1.0}),
        ("resilience4j/resilience4j resilience4j-retry/src/main/java/io/github/resilience4j/"
         "retry/RetryConfig.java:39-40 @f1c3be8e (v2.4.0)",
         "resilience4j/resilience4j resilience4j-circuitbreaker/src/main/java/io/github/"
         "resilience4j/circuitbreaker/CircuitBreakerConfig.java:43-52 @f1c3be8e")),
    Preset(
        "tenacity", "tenacity Retrying() out of the box (Python)",
        "tenacity 9.2.1",
        "0 (wait_none), forever (stop_never)",
        "unlimited; each attempt costs the client 1 ms (workers.attempt_overhead)",
        _fields("immediate", 0.1, 0.1, None, overhead=OVERHEAD),
        ("tenacity 9.2.1 (PyPI) tenacity/__init__.py:262-263; tenacity/wait.py:61-77",)),
    Preset(
        "tenacity-random-exponential", "tenacity wait_random_exponential() (Python)",
        "tenacity 9.2.1",
        "U(0, min(2^(k-1), max)) s, max = sys.maxsize / 2 (herdsim: 1e9 s, its largest "
        "duration; the same sleeps for the first 30 retries)",
        "unlimited (stop_never)",
        _fields("full_jitter", 1.0, 1e9, None),
        ("tenacity 9.2.1 (PyPI) tenacity/wait.py:201-245,247-276; tenacity/_utils.py:48",)),
    Preset(
        "backoff", "backoff.on_exception(backoff.expo, ...) (Python)",
        "backoff 2.2.1",
        "U(0, 2^(k-1)) s (expo with full_jitter)",
        "unlimited (max_tries None)",
        _fields("full_jitter", 1.0, NO_CAP, None),
        ("backoff 2.2.1 (PyPI) backoff/_wait_gen.py:7-31; backoff/_jitter.py:18-28",
         "backoff 2.2.1 backoff/_decorator.py:30-32; backoff/_common.py:34-56")),
    Preset(
        "cenkalti", "cenkalti/backoff NewExponentialBackOff (Go)",
        "cenkalti/backoff v4.3.0",
        "I_k * U(0.5, 1.5), I_1 = 500 ms, I_(k+1) = min(1.5 I_k, 60 s)",
        "stops after 15 min elapsed: 24 retries (where the nominal sleeps pass 15 min)",
        _fields("cenkalti", 0.5, 60.0, 24),
        ("cenkalti/backoff exponential.go:79-83,171-180,193-199,204-215 @720b7898 (v4.3.0)",
         "cenkalti/backoff CHANGELOG.md @14d1b28f; error.go @74d45b0f (stored copies, v7)"),
        "the stop is on elapsed time (call time included); herdsim stops after the count "
        "of retries whose nominal sleeps fit in 15 min. The latest release is v7.0.0, which "
        "could not be fetched whole: its CHANGELOG keeps the defaults (v5 moved the 15 min "
        "into Retry) and adds RetryAfterError, which an operation must return itself "
        "(Retry then sleeps exactly it and resets the backoff): the preset ignores "
        "Retry-After, as an operation that never returns one does"),
    Preset(
        "google-api-core", "google.api_core.retry.Retry() defaults (Python)",
        "google-api-core 2.44.0",
        "U(0, min(2^(k-1), 60)) s",
        "120 s overall deadline: 8 retries (where the mean sleeps pass 120 s)",
        _fields("full_jitter", 1.0, 60.0, 8, retry_on=("reset", 500, 503, 429)),
        ("google-api-core 2.44.0 (PyPI) google/api_core/retry/retry_base.py:42-45,99-121,"
         "248-251; if_transient_error",),
        "the deadline is wall-clock (call time included); herdsim stops after a count. The "
        "default predicate, if_transient_error, retries a 500, 503, 429 and a requests "
        "ConnectionError (refused or reset), not a read timeout"),
    Preset(
        "temporal", "Temporal default activity retry policy",
        "temporal 1.31.2",
        "min(1 s * 2^(k-1), 100 s), no jitter",
        "unlimited attempts; the server's timer re-dispatches the task (the worker is free)",
        _fields("exponential", 1.0, 100.0, None, "requeue", 0.01),
        ("temporalio/temporal common/retrypolicy/retry_policy.go:32-37 @19a77430 (v1.31.2)",
         "temporalio/temporal common/backoff/retry.go:183-186; service/history/workflow/"
         "retry.go:70-110 @19a77430")),
    Preset(
        "finagle", "Finagle client requeues with the default RetryBudget (Scala)",
        "finagle 24.5.0",
        "0 (immediate requeue)",
        "RetryBudget: ttl 10 s, 10 retries/s minimum, 20% of requests; each attempt costs "
        "the client 1 ms (workers.attempt_overhead)",
        _fields("immediate", 0.1, 0.1, None, overhead=OVERHEAD,
                budget={"kind": "ratio", "scope": "pool", "window": 10.0, "ratio": 0.2,
                        "min_per_second": 10.0}),
        ("twitter/finagle finagle-core/src/main/scala/com/twitter/finagle/service/"
         "RetryBudget.scala:97-114 @cc9e3dfa (finagle-24.5.0)",
         "twitter/finagle finagle-core/.../service/Retries.scala:94-96,114; "
         "RequeueFilter.scala:100-110,156 @cc9e3dfa"),
        "Finagle requeues only when the endpoint's status is Open and at most ceil(0.2 x "
        "balance) times per request; herdsim has neither"),
    Preset(
        "kafka", "Kafka producer retries (Java client)",
        "kafka-clients 3.8.0",
        "min(1000, floor(100 * 2^min(k-1, log2 10) * U(0.8, 1.2))) ms",
        "retries MAX_INT within delivery.timeout.ms 120 s: 128 retries (where the mean "
        "sleeps pass 120 s)",
        _fields("kafka", 0.1, 1.0, 128),
        ("apache/kafka clients/src/main/java/org/apache/kafka/common/utils/"
         "ExponentialBackoff.java:50-59 @771b9576 (3.8.0)",
         "apache/kafka clients/.../CommonClientConfigs.java:98,105,107,108; producer/"
         "ProducerConfig.java:375,391; producer/internals/RecordAccumulator.java:813 "
         "@771b9576"),
        "the exponent is capped before the jitter: from k = 5 the sleep is 1000 ms half the "
        "time and U(800, 1000) ms otherwise, not always 1000 ms"),
    Preset(
        "spring-retry", "Spring Retry @Retryable with @Backoff() (Java)",
        "spring-retry 2.0.12",
        "1000 ms constant",
        "maxAttempts 3",
        _fields("fixed", 1.0, 1.0, 2),
        ("spring-projects/spring-retry src/main/java/org/springframework/retry/annotation/"
         "Backoff.java:59,69; Retryable.java:133 @802c4450 (v2.0.12)",)),
    Preset(
        "spring-kafka", "spring-kafka DefaultErrorHandler (Java)",
        "spring-kafka 4.1.1",
        "0 ms, blocking the partition's consumer",
        "10 deliveries (FixedBackOff(0, 9)), then the record is logged and skipped; each "
        "attempt costs the client 1 ms (workers.attempt_overhead)",
        _fields("immediate", 0.1, 0.1, 9, overhead=OVERHEAD),
        ("spring-projects/spring-kafka spring-kafka/src/main/java/org/springframework/kafka/"
         "listener/SeekUtils.java:57,63; DefaultErrorHandler.java:63 @755a68f6 (v4.1.1)",)),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}


def _adaptive() -> Preset:
    """aws-adaptive: aws-standard (whatever it sets) plus botocore's client rate limiter."""
    standard = PRESETS["aws-standard"]
    return Preset(
        "aws-adaptive", "botocore retry_mode=adaptive (AWS SDK for Python)",
        standard.release,
        standard.formula + "; before each attempt a token of the client rate limiter "
        "(CUBIC, C 0.4, beta 0.7; at most 2 x the measured rate), used once a throttle "
        "has been seen",
        standard.limits + "; one limiter per client (scope pool: the workers share one)",
        {**standard.fields, "client_limiter": {"kind": "aws_adaptive", "scope": "pool"}},
        (*standard.sources,
         "botocore 1.44.8 botocore/retries/adaptive.py:10-35,57-89,95-128; throttling.py:6-41; "
         "bucket.py:20-21,36-57,67-115 (the same text as boto/botocore @0e6e2404)"),
        "botocore blocks the sending thread until a token is there; herdsim's worker "
        "sleeps botocore's wait and asks again (at least 1 us, herdsim's resolution). "
        + standard.differs)


PRESETS["aws-adaptive"] = _adaptive()
VISIBILITY_TIMEOUT = 30.0  # SQS's default VisibilityTimeout (documentation)
MAX_RECEIVE_COUNT = 5  # a redrive policy's maxReceiveCount: 1-1000, no default; a choice
PRESETS["sqs-lambda"] = Preset(
    "sqs-lambda", "AWS Lambda's SQS event source mapping (standard queue), from AWS's "
    "documentation",
    "AWS documentation (no code: the service is closed)",
    "a failed batch is visible again after the visibility timeout (30 s, SQS's default)",
    "maxReceiveCount 5 receives, then the DLQ; pollers start at 5 concurrent batches, add "
    "up to 300 a minute while messages wait, to 1,000, and scale back when idle",
    {**_fields("fixed", VISIBILITY_TIMEOUT, VISIBILITY_TIMEOUT, MAX_RECEIVE_COUNT - 1,
               "requeue", 0.1),
     "workers.count": 5,
     "workers.autoscale": {"metric": "queue_depth", "target": 1, "min": 5, "max": 1000,
                           "interval": 1.0, "step_limit": 5, "cooldown": 0.0}},
    ("docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html (five batches, up to "
     "300 more instances per minute, 1,000 batches, scales back to five)",
     "docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html (MaximumConcurrency "
     "2-1000: set workers.autoscale.max)",
     "docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide (visibility "
     "timeout 30 s by default; redrive policy maxReceiveCount)"),
    "every number is from AWS's documentation, not code (the service is closed). One "
    "worker is one concurrent batch of one message; 300 a minute is applied as 5 a second "
    "both ways (the docs do not say how fast Lambda scales back, nor the 2-batch "
    "optimisation); maxReceiveCount has no default, 5 is a choice")
PRESETS["k8s-workqueue"] = Preset(
    "k8s-workqueue", "client-go workqueue, DefaultControllerRateLimiter (Go, Kubernetes "
    "controllers)",
    "client-go v0.36.3",
    "max(5 ms * 2^(k-1) capped at 1000 s, the delay of a reservation from a 10/s, burst-100 "
    "bucket every retry shares); with workload.keys, k counts the key's failures",
    "retries forever (a controller requeues until Forget); the item waits in the delaying "
    "queue (the worker is free)",
    {**_fields("exponential", 0.005, 1000.0, None, "requeue", 0.001),
     "retry.bucket": {"rate": 10.0, "burst": 100}},
    ("kubernetes/client-go util/workqueue/default_rate_limiters.go:50-55,68-70,116-149,"
     "222-232 @v0.36.3",
     "kubernetes/client-go util/workqueue/delaying_queue.go:249-268,355-369; queue.go:"
     "227-302 @v0.36.3 (util/workqueue/ is the same text at master @32ce75a7)"),
    "the delaying queue fires at the ready time; herdsim's poller runs every 1 ms. Without "
    "workload.keys every job is its own item (no two jobs are for one object); with it, "
    "queue.go's dirty and processing sets collapse jobs of one key")


def get(name: str) -> Preset:
    """The preset called *name*; ``ValueError`` listing the choices otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown preset {name!r}; choose one of: "
                         f"{', '.join(PRESETS)}") from None


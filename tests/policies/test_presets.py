"""Presets: each library's schedule checked against the library itself, or its source.

Where the library is pure Python on PyPI (tenacity, backoff, botocore, celery) the test
draws from the library and from the preset's strategy with the same seeded Python
``random`` stream and asserts the sequences are equal. It runs against the release the
preset was read from (``Preset.release``, pinned exactly in pyproject's ``test`` extra):
another installed version fails in one line naming both versions, before any number is
compared. For the others, and for a behaviour kept under a versioned name
(``aws-standard-1.43``), the test transcribes the source line it cites (at the commit
docs/policies.md names) and compares sequences the same way. ``k = 1`` is the first
retry; herdsim's strategies see ``attempt = k - 1``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import math
import os
import random
import re
from pathlib import Path
from types import SimpleNamespace

import backoff
import botocore.retries.quota
import botocore.retries.standard
import botocore.retryhandler
import numpy as np
import pytest
import tenacity
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from celery.app.task import Task
from celery.utils.time import get_exponential_backoff_interval
from conftest import assert_every_job_ends_in_one_place
from scipy import stats
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.experiments.compare import build_arms
from herdsim.experiments.sweep import plan
from herdsim.model import calls
from herdsim.model.simulation import Simulation
from herdsim.policies import presets, retry_after
from herdsim.policies.attempt import classes
from herdsim.policies.budgets import token_bucket as budget
from herdsim.results.result import run

SEEDS = range(5)
RETRIES = 30  # 2^30 s is 34 years: past it herdsim's NO_CAP (1e9 s) would bind


class PyRandom:
    """A numpy-Generator look-alike drawing from a Python ``random.Random``: the preset's
    strategy and the library then consume the very same numbers."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def random(self) -> float:
        return self.r.random()

    def integers(self, low: int, high: int) -> int:
        return self.r.randrange(low, high)


@functools.cache
def strategy_of(name: str):
    return load_scenario(_tiny(name)).retry.build()


@functools.cache
def throttling_strategy_of(name: str):
    return load_scenario(_tiny(name)).retry.build(throttling=True)


def _tiny(preset: str, **extra) -> dict:
    data = {"name": "p", "seed": 3, "duration": "3s", "workload": {"rate": 40},
            "workers": {"count": 8}, "downstream": {"concurrency": 4,
                                                    "service": {"mean": "20ms"}},
            "retry": {"preset": preset}}
    data.update(extra)
    return data


def preset_sleeps(name: str, seed: int, n: int = RETRIES) -> list[float]:
    strategy, rng = strategy_of(name), PyRandom(seed)
    out, prev = [], strategy.base
    for attempt in range(n):
        value = strategy.sleep(attempt, prev, rng)
        out.append(value)
        prev = value
    return out


# -- the library as the oracle --------------------------------------------------------------

# Each oracle package and the preset whose ``release`` names the version read.
ORACLES = {"botocore": "aws-standard", "tenacity": "tenacity", "backoff": "backoff",
           "celery": "celery"}


def read_version(package: str) -> str:
    """The version of *package* the presets were read from (``Preset.release``)."""
    name, version = presets.get(ORACLES[package]).release.split()
    assert name == package
    return version


def check_pinned(package: str) -> None:
    """Fail in one line (naming both versions, and what to re-read) unless *package* is
    installed at the release the presets were read from."""
    read, installed = read_version(package), importlib.metadata.version(package)
    if installed != read:
        pytest.fail(f"{package} {installed} is installed but the presets were read from "
                    f"{package} {read}: install {package}=={read} (pip install -e '.[test]'), "
                    f"or re-read {package} {installed}'s source for the presets that cite it "
                    f"(herdsim/policies/presets.py, docs/policies.md) and move the pin",
                    pytrace=False)


@pytest.fixture
def pinned(request):
    """An oracle test runs only against the release read (:func:`check_pinned`)."""
    check_pinned(request.param)


def oracle(package: str):
    """Mark a test as one that runs *package* as its oracle (through :func:`pinned`)."""
    return pytest.mark.parametrize("pinned", [package], indirect=True, ids=[package])


def test_the_test_extra_pins_every_oracle_at_the_release_read():
    """pyproject's ``test`` extra installs exactly the versions the presets were read from."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    extra = re.search(r"^test = \[(.*?)^\]", text, re.S | re.M)
    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', extra.group(1)))
    assert {package: pins.get(package) for package in ORACLES} == \
        {package: read_version(package) for package in ORACLES}


def test_a_different_installed_oracle_fails_in_one_line(monkeypatch):
    """The guard itself: with another version installed the oracle test stops at once."""
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.1")
    with pytest.raises(pytest.fail.Exception) as info:
        check_pinned("botocore")
    message = str(info.value)
    assert "\n" not in message
    assert "botocore 0.0.1 is installed" in message and read_version("botocore") in message


@oracle("tenacity")
@pytest.mark.parametrize("seed", SEEDS)
def test_tenacity_random_exponential_is_tenacity(seed, pinned):
    """tenacity/wait.py:204-221,250-252 @c650fb45: ``random.uniform(min, min(multiplier *
    2**(attempt_number - 1), max))`` with the defaults multiplier 1, max sys.maxsize/2."""
    wait, r = tenacity.wait_random_exponential(), random.Random(seed)
    random.seed(seed)  # tenacity draws from the global random
    expected = [wait(SimpleNamespace(attempt_number=k)) for k in range(1, RETRIES + 1)]
    assert preset_sleeps("tenacity-random-exponential", seed) == expected
    assert r.random() == random.Random(seed).random()  # (the helper stream is untouched)


@oracle("tenacity")
def test_tenacity_defaults_are_no_wait_forever(pinned):
    """tenacity/__init__.py:241-243: ``Retrying()`` is stop_never, wait_none."""
    retrying = tenacity.Retrying()
    assert retrying.stop is tenacity.stop_never
    assert [retrying.wait(SimpleNamespace(attempt_number=k)) for k in (1, 2, 50)] == [0, 0, 0]
    fields = presets.get("tenacity").fields
    assert fields["retry.strategy"] == "immediate" and fields["retry.max_retries"] is None
    assert preset_sleeps("tenacity", 0, 5) == [0.0] * 5
    assert fields["workers.attempt_overhead"] == presets.OVERHEAD


@oracle("backoff")
@pytest.mark.parametrize("seed", SEEDS)
def test_backoff_expo_full_jitter_is_backoff(seed, pinned):
    """backoff/_wait_gen.py:8-32, _jitter.py:18-28, _common.py:34-56 @d82b23c4: expo yields
    ``2**n`` from n = 0 after one priming ``send``; on_exception applies full_jitter."""
    gen = backoff.expo()
    next(gen)
    random.seed(seed)
    expected = [backoff.full_jitter(gen.send(None)) for _ in range(RETRIES)]
    assert preset_sleeps("backoff", seed) == expected


@oracle("backoff")
def test_backoff_defaults(pinned):
    """backoff/_decorator.py:30-32: ``max_tries=None``, ``jitter=full_jitter``."""
    params = inspect.signature(backoff.on_exception).parameters
    assert params["max_tries"].default is None
    assert params["jitter"].default is backoff.full_jitter
    assert presets.get("backoff").fields["retry.max_retries"] is None


# botocore's view of herdsim's failures, for the schedule and quota tests: a throttling
# answer (THROTTLED) is a 429 with no modeled error code; a transient answer a 503, an error
# a 500, a timeout a ReadTimeoutError with no response (AS_BOTOCORE below has every outcome).
STATUS = {"throttled": 429, "down": 503, "error": 500}


def botocore_context(k: int, failure: str, retry_after_ms: int | None = None,
                     request_context: dict | None = None):
    """botocore's RetryContext for failed attempt *k* (1-based) ending in *failure*."""
    headers = {} if retry_after_ms is None else {"x-amz-retry-after": str(retry_after_ms)}
    http = (None if failure == "timeout"
            else SimpleNamespace(status_code=STATUS[failure], headers=headers))
    return botocore.retries.standard.RetryContext(
        attempt_number=k, http_response=http,
        caught_exception=ReadTimeoutError(endpoint_url="x") if failure == "timeout" else None,
        request_context=request_context)


def botocore_backoff(draw):
    """botocore's standard-mode backoff as ``register_retry_handler`` builds it
    (retries/standard.py:65-74), drawing from *draw*."""
    detector = botocore.retries.standard.ThrottlingErrorDetector(
        botocore.retries.standard.RetryEventAdapter())
    return botocore.retries.standard.ExponentialBackoff(
        random=draw, service_name="sqs", throttling_detector=detector), detector


@oracle("botocore")
def test_botocore_defaults_to_standard_mode(pinned, monkeypatch):
    """configprovider.py:157: a client configured with nothing retries in standard mode,
    3 attempts (retries/standard.py:36), as the aws-standard preset."""
    import botocore.session

    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    client = botocore.session.get_session().create_client(
        "sqs", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    assert client.meta.config.retries["mode"] == "standard"
    assert presets.get("aws-standard").fields["retry.max_retries"] == \
        botocore.retries.standard.DEFAULT_MAX_ATTEMPTS - 1


@oracle("botocore")
@pytest.mark.parametrize("seed", SEEDS)
def test_aws_standard_is_botocore(seed, pinned):
    """retries/standard.py:373-421: ``random() * min(base_scale * 2 ** (attempt_number - 1),
    20)``, base_scale 1 s after a throttling error and 50 ms otherwise; attempt_number is
    the failed one. Failures drawn at random among 429, 503, 500 and timeouts."""
    r, kinds = random.Random(seed), random.Random(100 + seed)
    backoff_, _ = botocore_backoff(r.random)
    plain, throttling = strategy_of("aws-standard"), throttling_strategy_of("aws-standard")
    rng, expected, got = PyRandom(seed), [], []
    for k in range(1, RETRIES + 1):
        failure = kinds.choice(["throttled", "down", "error", "timeout"])
        expected.append(backoff_.delay_amount(botocore_context(k, failure)))
        got.append((throttling if failure == "throttled" else plain).sleep(k - 1, 0.0, rng))
    assert got == expected


@oracle("botocore")
@pytest.mark.parametrize("seed", SEEDS)
def test_aws_standard_retry_after_is_botocore(seed, pinned):
    """retries/standard.py:396-405,423-443: ``x-amz-retry-after`` (ms) raises the delay to
    its value, by at most 5 s: ``max(t_i, min(retry_after, t_i + 5))``. herdsim's
    downstream.retry_after is that header (sent with THROTTLED and REJECTED answers)."""
    fields = presets.get("aws-standard").fields
    heed = retry_after.rule(fields["retry.retry_after"], fields["retry.retry_after_limit"])
    r, hints = random.Random(seed), random.Random(200 + seed)
    backoff_, _ = botocore_backoff(r.random)
    throttling, rng = throttling_strategy_of("aws-standard"), PyRandom(seed)
    for k in range(1, RETRIES + 1):
        ms = hints.choice([0, 1, 250, 999, 2000, 5500, 30_000, 10**7])
        expected = backoff_.delay_amount(botocore_context(k, "throttled", ms))
        assert heed(throttling.sleep(k - 1, 0.0, rng), ms / 1000) == expected


@oracle("botocore")
def test_aws_standard_quota_is_botocore(pinned):
    """retries/standard.py:637-656,703-760 and quota.py:7: the retry quota herdsim's
    ``budget preset: aws`` runs, event by event against botocore's own objects, with
    botocore's own throttling detector classifying each failure."""
    quota = botocore.retries.quota.RetryQuota()
    _, detector = botocore_backoff(random.random)
    checker = botocore.retries.standard.RetryQuotaChecker(quota, detector)
    bucket = budget.TokenBucketBudget(**budget.PRESETS["aws"])
    rng, refused, kinds = random.Random(11), 0, set()
    for _ in range(3000):  # logical requests: tries until a success or 2 retries
        context, paid = {}, 0.0
        for attempt in range(1, 4):
            ok = rng.random() < 0.35
            if ok:
                checker.release_retry_quota(context, SimpleNamespace(status_code=200))
                bucket.on_result(0.0, True, paid)
                break
            bucket.on_result(0.0, False, paid)
            if attempt == 3:
                break
            failure = rng.choice(["throttled", "down", "error", "timeout"])
            allowed = checker.acquire_retry_quota(
                botocore_context(attempt, failure, request_context=context))
            ours, paid = bucket.allow_retry(0.0, failure == "timeout", failure == "throttled")
            assert allowed == ours
            assert quota.available_capacity == bucket.tokens
            if not allowed:
                refused += 1
                kinds.add(failure)
                break
    assert refused > 100 and kinds == set(STATUS) | {"timeout"}  # dry and refilled, all kinds
    assert botocore.retries.quota.RetryQuota.INITIAL_CAPACITY == bucket.capacity == 500


# Each herdsim failure as botocore receives it: an answer's status (a 503 from a full room,
# an admission limit, shedding or CoDel; a 429 from a rate limiter or an admission limit
# answering 429; a 500 error), no answer within the client's timeout, or a connection that
# fails before an answer (refused while down, reset when a crash fails the call).
AS_BOTOCORE = {
    calls.REJECTED: dict(http_response=SimpleNamespace(status_code=503, headers={})),
    calls.THROTTLED: dict(http_response=SimpleNamespace(status_code=429, headers={})),
    calls.ERROR: dict(http_response=SimpleNamespace(status_code=500, headers={})),
    calls.TIMEOUT: dict(caught_exception=ReadTimeoutError(endpoint_url="x")),
    calls.DOWN: dict(caught_exception=EndpointConnectionError(endpoint_url="x")),
    calls.FAILED: dict(caught_exception=ConnectionClosedError(endpoint_url="x")),
}


@oracle("botocore")
@pytest.mark.parametrize("preset", ["aws-standard", "aws-adaptive"])
@pytest.mark.parametrize("outcome", sorted(AS_BOTOCORE))
def test_aws_treats_each_failure_as_botocore_does(preset, outcome, pinned):
    """botocore's own classifiers, given each failure herdsim produces: whether it is
    retried (``StandardRetryConditions``, standard.py:659-693), whether it is throttling
    (``ThrottlingErrorDetector``: the base 1 s or 50 ms, standard.py:409-421; the quota's
    cost, :720-733; the adaptive limiter's throttle, adaptive.py), and what the retry
    costs (``RetryQuotaChecker``). herdsim's decisions for the preset must be the same:
    a 429 is throttling, a 503 is not."""
    context = botocore.retries.standard.RetryContext(
        attempt_number=1, request_context={}, **AS_BOTOCORE[outcome])
    retryable = botocore.retries.standard.StandardRetryConditions().is_retryable(context)
    _, detector = botocore_backoff(random.random)
    throttling = detector.is_throttling_error_from_context(context)
    checker = botocore.retries.standard.RetryQuotaChecker(
        botocore.retries.quota.RetryQuota(), detector)
    assert checker.acquire_retry_quota(context)
    cost = context.request_context["retry_quota_capacity"]

    sc = load_scenario(_tiny(preset))
    skipped, ours = classes(sc.retry)
    assert (outcome not in skipped) == retryable
    assert (outcome in ours) == throttling
    assert sc.retry.build(throttling=outcome in ours).base == (1.0 if throttling else 0.05)
    bucket = budget.TokenBucketBudget(**budget.PRESETS[sc.budget.preset])
    assert bucket.allow_retry(0.0, outcome == calls.TIMEOUT, outcome in ours) == (True, cost)


@oracle("botocore")
@pytest.mark.parametrize("outcome", sorted(AS_BOTOCORE))
def test_aws_legacy_retries_each_failure_as_botocore_does(outcome, pinned):
    """Legacy mode: ``data/_retry.json``'s default policies, built by botocore's own
    ``retryhandler.create_checker_from_retry_config``, retry every herdsim failure (500,
    502-504, 429, throttling codes, and ``GENERAL_CONNECTION_ERROR``: connection errors
    and read timeouts, retryhandler.py:33-39); the preset retries them all too."""
    import botocore.loaders
    import botocore.translate

    data = botocore.loaders.Loader().load_data("_retry")
    config = botocore.translate.build_retry_config("sqs", data["retry"], data["definitions"])
    checker = botocore.retryhandler.create_checker_from_retry_config(config)
    given = AS_BOTOCORE[outcome]
    response = (given["http_response"], {}) if "http_response" in given else None
    retryable = checker(attempt_number=1, response=response,
                        caught_exception=given.get("caught_exception"), retries_context={})
    skipped, _ = classes(load_scenario(_tiny("aws-legacy")).retry)
    assert retryable and outcome not in skipped


@oracle("tenacity")
def test_tenacity_retries_any_failure_by_default(pinned):
    """``Retrying()``'s default predicate, ``retry_if_exception_type()``, retries any
    exception, whatever the failure (tenacity/__init__.py, retry.py): the preset retries
    every failure; a user's own predicate is ``retry.retry_on``."""
    retrying = tenacity.Retrying()
    for error in (TimeoutError(), ConnectionResetError(), ConnectionRefusedError(),
                  RuntimeError("500"), RuntimeError("503"), RuntimeError("429")):
        state = tenacity.RetryCallState(retrying, fn=None, args=(), kwargs={})
        state.set_exception((type(error), error, None))
        assert retrying.retry(state)
    assert set(load_scenario(_tiny("tenacity")).retry.retry_on) == set(presets.RETRY_ON)


def test_a_503_is_throttling_only_where_the_scenario_says_so():
    """``retry.throttling: [429, 503]`` (a service that throttles with 503, as S3's
    SlowDown) makes a refusal from the room throttling too; an outage's refused
    connection never is."""
    sc = load_scenario(_tiny("aws-standard", retry={"preset": "aws-standard",
                                                    "throttling": [429, 503]}))
    assert classes(sc.retry)[1] == {calls.THROTTLED, calls.REJECTED}


def _admission_run(status: int):
    """:func:`_aws_run` against an admission limit of 2 calls of 50 ms (40 calls/s for
    300 jobs/s) answering *status*."""
    return _aws_run(admission={"kind": "fixed", "limit": 2, "status": status},
                    service={"mean": "50ms"})


@pytest.mark.parametrize(("status", "base"), [(429, 1.0), (503, 0.05)])
def test_aws_standard_in_the_engine_backs_off_a_503_as_a_transient_error(status, base):
    """The same admission limit, answering 429 or 503: botocore sleeps U(0, 1 s) before
    the first retry after a 429 and U(0, 50 ms) after a 503 (standard.py:409-421). KS at
    alpha 0.001 (fixed seed) for the first retry's law; the other law is ruled out by the
    largest sleep."""
    sleeps = _admission_run(status).sleeps
    first = sleeps[sleeps["attempt"] == 0]["sleep"]
    assert len(first) > 200 and first.max() < base
    assert stats.kstest(first, stats.uniform(0, base).cdf).pvalue > 0.001
    if base == 1.0:
        assert first.max() > 0.05


@pytest.mark.parametrize(("preset", "retried"), [
    ("grpc-retry", {"reset", 503, 429}),
    ("envoy", {"timeout", "reset", 500, 503}),
    ("google-api-core", {"reset", 500, 503, 429}),
    ("sidekiq", set(presets.RETRY_ON)),
    ("aws-standard", set(presets.RETRY_ON)),
])
def test_a_preset_retries_what_its_library_retries(preset, retried):
    """gRPC A6's example retryableStatusCodes [UNAVAILABLE] (a 503, a 429 and a broken
    connection map to it: grpc doc/http-grpc-status-mapping.md; a deadline spans all
    attempts); Envoy's retry_on 5xx (no 429); google-api-core's if_transient_error (no
    read timeout); a job queue retries any exception. A failure not retried dead-letters
    the job at once."""
    sc = load_scenario(_tiny(preset))
    assert set(sc.retry.retry_on) == retried
    skipped, _ = classes(sc.retry)
    assert {calls.STATUS[o] for o in skipped} == set(presets.RETRY_ON) - retried


def test_a_failure_not_retried_dead_letters_the_job_at_once():
    """grpc-retry against a downstream that times every call out (DEADLINE_EXCEEDED is
    not retryable): every job ends after one attempt, in the DLQ."""
    res = run(load_scenario(_tiny("grpc-retry", downstream={
        "concurrency": 1, "service": {"distribution": "constant", "mean": "10s"},
        "timeout": "50ms"}, budget=None)))
    ended = res.jobs[res.jobs["outcome"] == "dead_lettered"]
    assert len(ended) > 10 and (ended["attempts"] == 1).all()
    assert res.sleeps.empty


def test_retry_on_holds_on_the_fast_path_too():
    """``retry_on`` needs no general loop (it is not a gating field): a plain scenario
    whose every call times out, and which does not retry timeouts, ends every job after
    one attempt on the fast path; retrying them, it retries."""
    from herdsim.model.worker import plain

    data = {"name": "p", "seed": 3, "duration": "3s", "workload": {"rate": 40},
            "workers": {"count": 8},
            "downstream": {"concurrency": 1, "timeout": "50ms",
                           "service": {"distribution": "constant", "mean": "10s"}},
            "retry": {"retry_on": ["reset", 500, 503, 429], "max_retries": 3}}
    sc = load_scenario(data)
    assert plain(sc)
    res = run(sc)
    ended = res.jobs[res.jobs["outcome"] == "dead_lettered"]
    assert len(ended) > 100 and (ended["attempts"] == 1).all() and res.sleeps.empty
    data["retry"]["retry_on"] = ["timeout"]
    jobs = run(load_scenario(data)).jobs
    ended = jobs[jobs["outcome"] == "dead_lettered"]
    assert len(ended) > 10 and (ended["attempts"] == 4).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_aws_standard_1_43_matches_standard_py(seed):
    """botocore 1.43 (standard.py:425-428 @0e6e2404, the path taken while
    NEW_RETRIES_ENABLED was False): ``random() * min(2 ** (attempt_number - 1), 20)`` for
    every error; 3 attempts; the quota costs 5, 10 after a timeout (:720-735)."""
    r = random.Random(seed)
    expected = [r.random() * min(2 ** (k - 1), 20) for k in range(1, RETRIES + 1)]
    assert preset_sleeps("aws-standard-1.43", seed) == expected
    fields = presets.get("aws-standard-1.43").fields
    assert fields["retry.max_retries"] == 2 and fields["retry.retry_after"] == "ignore"
    assert "retry.throttling_base" not in fields
    costs = budget.PRESETS[fields["budget"]["preset"]]
    assert (costs["retry_cost"], costs["timeout_cost"], costs["throttling_cost"]) == (5, 10, 5)


@oracle("botocore")
@pytest.mark.parametrize("seed", SEEDS)
def test_aws_legacy_is_botocore(seed, pinned):
    """botocore/retryhandler.py:43-63 with data/_retry.json:92-97 (base 'rand', growth 2)."""
    random.seed(seed)
    expected = [botocore.retryhandler.delay_exponential("rand", 2, k)
                for k in range(1, RETRIES + 1)]
    assert preset_sleeps("aws-legacy", seed) == expected


@oracle("celery")
@pytest.mark.parametrize("seed", SEEDS)
def test_celery_is_celery(seed, pinned):
    """celery/utils/time.py:463-477 as app/autoretry.py:48-54 calls it (factor
    int(max(1, True)) = 1, maximum 600, full_jitter True) @5dc781f0."""
    random.seed(seed)
    expected = [get_exponential_backoff_interval(factor=1, retries=k - 1, maximum=600,
                                                 full_jitter=True)
                for k in range(1, RETRIES + 1)]
    assert preset_sleeps("celery", seed) == expected
    assert presets.get("celery").fields["retry.max_retries"] == Task.max_retries == 3


def _aws_run(**downstream):
    """aws-standard (its quota left out: only the sleeps are looked at), 300 workers."""
    down = {"concurrency": 50, "service": {"mean": "5ms"}, **downstream}
    return run(load_scenario(_tiny("aws-standard", downstream=down, budget=None,
                                   workload={"rate": 300}, workers={"count": 300})))


def _throttled_run(**downstream):
    """:func:`_aws_run` against a rate limiter that throttles most calls, and nothing else."""
    return _aws_run(rate_limit={"rate": 20, "burst": 1}, **downstream)


def test_aws_standard_in_the_engine_splits_throttling_from_other_failures():
    """In a run, a retry after a 429 (rate limiter) sleeps U(0, 1 s * 2^n) and one after an
    outage's fast failure U(0, 50 ms * 2^n). KS at alpha 0.001 (fixed seed) against each
    law for the first retry; the other law is rejected outright."""
    throttled = _throttled_run().sleeps
    first = throttled[throttled["attempt"] == 0]["sleep"]
    assert len(first) > 200 and first.max() < 1.0
    assert stats.kstest(first, stats.uniform(0, 1.0).cdf).pvalue > 0.001
    assert first.max() > 0.5  # (50 ms would be the other law)
    down = _aws_run(outages=[{"start": "1s", "duration": "1s"}]).sleeps
    first = down[down["attempt"] == 0]["sleep"]
    assert len(first) > 200 and first.max() < 0.05
    assert stats.kstest(first, stats.uniform(0, 0.05).cdf).pvalue > 0.001


@pytest.mark.parametrize(("hint", "low", "high"), [("2s", 2.0, 2.0), ("30s", 5.0, 7.0)])
def test_aws_standard_in_the_engine_heeds_retry_after_by_at_most_5s(hint, low, high):
    """downstream.retry_after with aws-standard: the sleep is max(t, min(h, t + 5)) with
    t < 1 s * 2^n, n <= 1: exactly 2 s for a 2 s hint; t + 5 s, in [5, 7), for 30 s."""
    sleeps = _throttled_run(retry_after=hint).sleeps["sleep"]
    assert len(sleeps) > 100 and sleeps.min() >= low and sleeps.max() <= high
    if low == high:
        assert (sleeps == low).all()


# -- the others: the source line, transcribed -------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_sidekiq_matches_job_retry_rb(seed):
    """lib/sidekiq/job_retry.rb:238 ``delay = (count**4) + 15`` and :202 ``jitter =
    rand(10 * (count + 1))``, count from 0 (:167); 25 retries (:73, :186) @1bb4aa06."""
    r = random.Random(seed)
    expected = [c**4 + 15 + r.randrange(10 * (c + 1)) for c in range(25)]
    assert preset_sleeps("sidekiq", seed, 25) == expected
    fields = presets.get("sidekiq").fields
    assert (fields["retry.max_retries"], fields["workers.retry_mode"]) == (25, "requeue")


@pytest.mark.parametrize("seed", SEEDS)
def test_envoy_matches_backoff_strategy_cc(seed):
    """backoff_strategy.cc:13-19 ``random() % next_interval_``, doubling while below
    ``doubling_limit_ = max / 2`` (backoff_strategy.h); base 25 ms, max 10 x base
    (retry_state_impl.cc:78-86 @e78906c5)."""
    r, interval, expected = random.Random(seed), 25, []
    for _ in range(RETRIES):
        expected.append(r.randrange(interval) / 1000)
        interval = interval * 2 if interval < 250 // 2 else 250
    assert preset_sleeps("envoy", seed) == expected
    assert presets.get("envoy").fields["retry.max_retries"] == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_grpc_connect_matches_grpc_go(seed):
    """grpc-go internal/backoff/backoff.go:56-75 with backoff/backoff.go:47-52 (1 s, 1.6,
    0.2, 120 s) @4793ad04: retries == 0 returns BaseDelay unjittered."""
    r, expected = random.Random(seed), []
    for retries in range(RETRIES):
        if retries == 0:
            expected.append(1.0)
            continue
        b, n = 1.0, retries
        while b < 120.0 and n > 0:
            b *= 1.6
            n -= 1
        expected.append(min(b, 120.0) * (1 + 0.2 * (r.random() * 2 - 1)))
    assert preset_sleeps("grpc-connect", seed) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_grpc_retry_matches_stream_go(seed):
    """grpc-go stream.go:866-869 ``min(InitialBackoff * BackoffMultiplier^n, MaxBackoff) *
    (0.8 + 0.4 rand)`` with gRFC A6's example policy (A6-client-retries.md:86-89)."""
    r = random.Random(seed)
    expected = [min(0.1 * 2.0**n, 1.0) * (0.8 + 0.4 * r.random()) for n in range(RETRIES)]
    assert preset_sleeps("grpc-retry", seed) == pytest.approx(expected, rel=1e-12)
    assert presets.get("grpc-retry").fields["retry.max_retries"] == 4 - 1


@pytest.mark.parametrize("seed", SEEDS)
def test_cenkalti_matches_exponential_go(seed):
    """cenkalti/backoff v4 exponential.go:171-180,193-215 (500 ms, 0.5, 1.5, 60 s) @720b7898:
    ``min + random * (max - min + 1)`` nanoseconds around the current interval."""
    r, current, expected = random.Random(seed), 0.5e9, []
    for _ in range(RETRIES):
        delta = 0.5 * current
        expected.append((current - delta + r.random() * (2 * delta + 1)) / 1e9)
        current = 60e9 if current >= 60e9 / 1.5 else current * 1.5
    assert preset_sleeps("cenkalti", seed) == pytest.approx(expected, rel=1e-12)


def test_cenkalti_max_retries_is_where_15_minutes_run_out():
    """exponential.go:83,171-180: NextBackOff stops once elapsed + next > 15 min. With the
    nominal (un-jittered) intervals and no call time that is after the 24th retry."""
    strategy, total, count = strategy_of("cenkalti"), 0.0, 0
    while total + strategy.intervals.at(count) <= 15 * 60:
        total += strategy.intervals.at(count)
        count += 1
    assert presets.get("cenkalti").fields["retry.max_retries"] == count


@pytest.mark.parametrize("seed", SEEDS)
def test_kafka_matches_exponential_backoff_java(seed):
    """ExponentialBackoff.java:46-63 @1eb76443 with CommonClientConfigs.java:98-108 (100 ms,
    1000 ms, base 2, jitter 0.2); the producer asks backoff(attempts - 1)
    (RecordAccumulator.java:814): ``min((long) (U(0.8, 1.2) * 100 * 2^min(n, expMax)), 1000)``.
    """
    r, exp_max, expected = random.Random(seed), math.log(1000 / 100) / math.log(2), []
    for n in range(RETRIES):
        term = 100 * 2 ** min(n, exp_max)
        expected.append(min(math.floor((0.8 + 0.4 * r.random()) * term), 1000) / 1000)
    assert preset_sleeps("kafka", seed) == expected


def test_kafka_caps_the_exponent_before_the_jitter():
    """ExponentialBackoff.java:58-63: from k = 5 the term is 1000 ms before the jitter, so
    half the sleeps are exactly 1 s and the rest U(0.8, 1) s (not always 1 s)."""
    strategy, rng = strategy_of("kafka"), np.random.default_rng(8)
    draws = np.array([strategy.sleep(a, 0.0, rng) for a in range(4, 12) for _ in range(100)])
    assert 0.45 < np.mean(draws == 1.0) < 0.55  # 800 draws: sd 0.018
    assert draws.min() >= 0.8 and 0.75 < np.mean(draws[draws < 1.0] < 0.9) * 2 < 1.25


def test_mean_sleep_deadlines():
    """google-api-core retry_base.py:46 (120 s) and Kafka ProducerConfig.java:386
    (delivery.timeout.ms 120 s) stop on time; the presets stop after the retry count whose
    mean cumulative sleep still fits (means from 300 seeded draws per retry: the cumulative
    mean's sd is under 0.1 s, far inside the 1% tolerance)."""
    for name, deadline in (("google-api-core", 120.0), ("kafka", 120.0)):
        strategy, rng = strategy_of(name), np.random.default_rng(5)
        means = [np.mean([strategy.sleep(a, 0.0, rng) for _ in range(300)])
                 for a in range(140)]
        cumulative = np.cumsum(means)
        n = presets.get(name).fields["retry.max_retries"]
        assert cumulative[n - 1] <= deadline * 1.01 and cumulative[n] > deadline * 0.99, name


def test_fixed_presets_match_their_constants():
    """Polly RetryConstants.cs:9,11,15 (constant, 3, 2 s); Resilience4j RetryConfig.java:39-40
    (500 ms, 3 attempts); spring-retry Backoff.java:59 (1000 ms), Retryable.java:133 (3
    attempts); spring-kafka SeekUtils.java:57,63 (FixedBackOff(0, 9)); Temporal
    retry_policy.go:76-80 (1 s, x2, 100 x initial, unlimited)."""
    expect = {"polly": ("fixed", 2.0, 3), "resilience4j": ("fixed", 0.5, 2),
              "spring-retry": ("fixed", 1.0, 2), "spring-kafka": ("immediate", None, 9),
              "temporal": ("exponential", 1.0, None)}
    for name, (strategy, base, retries) in expect.items():
        f = presets.get(name).fields
        assert f["retry.strategy"] == strategy and f["retry.max_retries"] == retries, name
        if base is not None:
            assert f["retry.base"] == base, name
    assert presets.get("temporal").fields["retry.cap"] == 100 * 1.0


def test_polly_http_is_decorrelated_jitter_v2_with_the_standard_breaker():
    """Polly RetryHelper.cs:75-105 (median first delay = base, 2 s) and
    CircuitBreakerConstants.cs:13-21 (0.1, 100, 5 s break, 30 s sampling)."""
    r = random.Random(4)
    prev, expected = 0.0, []
    for attempt in range(RETRIES):
        t = attempt + r.random()
        nxt = 2.0**t * math.tanh(math.sqrt(4.0 * t))
        expected.append((nxt - prev) * (1 / 1.4) * 2.0)
        prev = nxt
    strategy, rng, state, got = strategy_of("polly-http"), PyRandom(4), 2.0, []
    for attempt in range(RETRIES):
        value, state = strategy.sleep(attempt, state, rng)
        got.append(value)
    assert got == pytest.approx(expected, rel=1e-9)
    sc = load_scenario(_tiny("polly-http"))
    assert (sc.breaker.failure_rate_threshold, sc.breaker.minimum_calls, sc.breaker.window,
            sc.breaker.open_duration, sc.breaker.half_open_calls) == (0.1, 100, 30.0, 5.0, 1)


def test_finagle_budget_is_the_retry_budget_defaults():
    """finagle RetryBudget.scala:97,99,114: ttl 10 s, 10 retries/s minimum, 20%."""
    b = load_scenario(_tiny("finagle")).budget
    assert (b.kind, b.window, b.min_per_second, b.ratio) == ("ratio", 10, 10, 0.2)


# -- presets meeting scenarios ------------------------------------------------------------------


def test_file_fields_win_over_a_preset_written_in_the_file():
    sc = load_scenario(_tiny("sidekiq", retry={"preset": "sidekiq", "max_retries": 3}))
    assert (sc.retry.strategy, sc.retry.max_retries, sc.workers.retry_mode) == \
        ("sidekiq", 3, "requeue")


def test_set_preset_replaces_the_files_policy_and_other_sets_win():
    data = _tiny("sidekiq", retry={"strategy": "fixed", "base": "2s", "max_retries": 1})
    sc = load_scenario(data, {"retry.preset": "celery", "retry.max_retries": "7"})
    assert (sc.retry.preset, sc.retry.strategy, sc.retry.base, sc.retry.cap) == \
        ("celery", "celery", 1.0, 600.0)
    assert sc.retry.max_retries == 7 and sc.workers.poll_interval == 0.01
    # switching presets on a resolved scenario leaves nothing of the old one behind
    again = load_scenario(load_scenario(_tiny("resilience4j")).to_dict(),
                          {"retry.preset": "envoy"})
    assert not again.breaker.enabled and again.retry.strategy == "envoy"
    assert again == load_scenario(_tiny("envoy"))
    older = load_scenario(load_scenario(_tiny("aws-standard")).to_dict(),
                          {"retry.preset": "aws-standard-1.43"})
    assert older.retry.throttling_base is None and older.retry.retry_after_limit is None
    assert older == load_scenario(_tiny("aws-standard-1.43"))


def test_unknown_preset_is_one_line_listing_the_choices():
    with pytest.raises(ScenarioError) as info:
        load_scenario(_tiny("sidekick"))
    message = str(info.value)
    assert "\n" not in message and "retry.preset" in message
    assert all(name in message for name in presets.PRESETS)
    result = CliRunner().invoke(app, ["run", "x.yaml", "--set", "retry.preset=nope"])
    assert result.exit_code == 2


def test_zero_wait_presets_pay_for_each_attempt():
    """A zero-wait preset against a fail-fast downstream: each attempt costs the worker
    ``workers.attempt_overhead`` (1 ms), so simulated time moves on and a worker makes at
    most one attempt per millisecond. tenacity's unlimited retries without the overhead
    would stand time still: that scenario is refused."""
    down = {"concurrency": 4, "service": {"mean": "20ms"},
            "outages": [{"start": "1s", "duration": "1s"}]}
    for name in ("tenacity", "finagle", "spring-kafka"):
        s = run(load_scenario(_tiny(name, downstream=down))).summary
        assert 0 < s["attempts_total"] <= 8 * 3.0 / presets.OVERHEAD + s["jobs_submitted"]
    with pytest.raises(ScenarioError, match="attempt_overhead"):
        load_scenario(_tiny("tenacity", downstream=down), {"workers.attempt_overhead": "0"})


def test_every_preset_loads_and_runs_where_it_can():
    """Every preset validates and runs on a tiny scenario, and every job ends in exactly
    one place."""
    for name in presets.PRESETS:
        sim = Simulation(load_scenario(_tiny(name)))
        assert_every_job_ends_in_one_place(sim, sim.run())


def test_compare_presets_arms_are_the_presets_scenarios():
    base = load_scenario(_tiny("sidekiq"))
    arms = build_arms(base, presets=["sidekiq", "aws-standard", "envoy"],
                      vary={"workers.count": [4, 8]})
    assert [a.label for a in arms][:2] == ["sidekiq, workers.count=4",
                                           "sidekiq, workers.count=8"]
    aws = arms[2].scenario
    assert aws.budget.preset == "aws" and aws.workers.retry_mode == "sleep"
    assert aws.workers.count == 4
    with pytest.raises(ScenarioError, match="retry.preset"):
        build_arms(base, presets=["sidekiq", "nope"])
    with pytest.raises(ScenarioError):
        build_arms(base, strategies=["fixed"], presets=["sidekiq"])


@pytest.mark.slow
def test_compare_presets_cli(tmp_path):
    path = tmp_path / "s.yaml"
    import yaml

    data = _tiny("sidekiq")
    data["retry"] = {}
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["compare", str(path), "--presets", "envoy,polly",
                                      "--out", str(tmp_path / "out"), "--processes", "1",
                                      "--format", "png"])
    assert result.exit_code == 0, result.output
    assert "envoy" in result.output and "polly" in result.output


def test_sweep_over_presets_builds_each_presets_cell(tmp_path):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_tiny("sidekiq")))
    sweep = plan(path, ["workers.count=4,8"], presets=["celery", "kafka"])
    tasks = list(sweep.tasks())
    assert len(tasks) == 4
    assert {t.scenario["retry"]["strategy"] for t in tasks} == {"celery", "kafka"}
    with pytest.raises(Exception, match="retry.preset"):
        plan(path, [], strategies=["fixed"], presets=["celery"])


def test_presets_command_lists_every_preset_with_its_release_and_explains_its_source():
    """The listing is a table, a preset a row, the release read in its own column; the
    source lines come with --explain, not as notes between the rows."""
    from rich.console import Console

    from herdsim.cli.presets import _table

    result = CliRunner().invoke(app, ["presets"])
    assert result.exit_code == 0
    starts = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert all(preset.name in starts for preset in presets.PRESETS.values())
    assert "read from:" not in result.output and "release read:" not in result.output, \
        result.output
    wide = Console(width=1000, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    wide.print(_table())
    rows = {line.split()[0]: line for line in wide.export_text().splitlines()[4:]
            if line.strip()}
    for preset in presets.PRESETS.values():
        assert f" {preset.release} " in rows[preset.name], rows[preset.name]
    explained = CliRunner().invoke(app, ["presets", "--explain"])
    assert explained.exit_code == 0
    for preset in presets.PRESETS.values():
        assert all(f"read from: {source}\n" in explained.output for source in preset.sources)
    one = CliRunner().invoke(app, ["presets", "aws-standard"])
    assert "budget:" in one.output and "token_bucket" in one.output
    assert f"release read: {presets.get('aws-standard').release}" in one.output


@pytest.mark.parametrize(("extra", "field"), [
    ({"retry": {"throttling_base": "30s", "cap": "20s"}}, "retry.throttling_base"),
    ({"retry": {"retry_after": "use", "retry_after_limit": "5s"}}, "retry.retry_after_limit"),
    ({"retry": {"throttling_base": "-1s"}}, "retry.throttling_base"),
    ({"budget": {"kind": "token_bucket", "preset": "aws", "throttling_cost": -1}},
     "budget.throttling_cost"),
])
def test_the_throttling_fields_refuse_bad_input_in_one_line(extra, field):
    data = _tiny("sidekiq")
    for section, values in extra.items():
        data[section] = {**data.get(section, {}), **values}
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert field in str(info.value) and "\n" not in str(info.value)


# -- the library's own object as the strategy -------------------------------------------------

WAIT = tenacity.wait_random_exponential(multiplier=0.5, max=4)
EXPO = backoff.expo


def test_a_tenacity_wait_object_is_a_strategy():
    """``retry.strategy: module:attr`` naming a tenacity wait draws from tenacity itself:
    for retry k the sleeps follow U(0, min(0.5 * 2^(k-1), 4)) (KS, alpha 0.001, n 1000)."""
    data = _tiny("sidekiq")
    data["retry"] = {"strategy": f"{__name__}:WAIT", "max_retries": 3}
    strategy = load_scenario(data).retry.build()
    rng = np.random.default_rng(0)
    for attempt in range(4):
        draws = [strategy.sleep(attempt, 0.0, rng) for _ in range(1000)]
        high = min(0.5 * 2**attempt, 4)
        assert stats.kstest(draws, stats.uniform(0, high).cdf).pvalue > 0.001
    again = load_scenario(data).retry.build()
    assert [again.sleep(1, 0, np.random.default_rng(1)) for _ in range(3)] == \
        [strategy.sleep(1, 0, np.random.default_rng(1)) for _ in range(3)]
    state = random.getstate()
    strategy.sleep(2, 0.0, rng)
    assert random.getstate() == state  # the caller's random is left alone
    assert run(load_scenario(data)).summary["jobs_submitted"] > 0


def test_a_backoff_wait_generator_is_a_strategy():
    """A backoff generator (``backoff.expo``) keeps one generator per job: retry k sleeps
    U(0, 2^(k-1)) with full jitter (KS, alpha 0.001, n 1000)."""
    data = _tiny("sidekiq")
    data["retry"] = {"strategy": f"{__name__}:EXPO", "max_retries": 3,
                     "params": {"max_value": 8}}
    strategy = load_scenario(data).retry.build()
    assert strategy.stateful
    rng = np.random.default_rng(2)
    per_attempt: list[list[float]] = [[] for _ in range(4)]
    for _ in range(1000):
        state = None
        for attempt in range(4):
            value, state = strategy.sleep(attempt, state, rng)
            per_attempt[attempt].append(value)
    for attempt, draws in enumerate(per_attempt):
        high = min(2**attempt, 8)
        assert stats.kstest(draws, stats.uniform(0, high).cdf).pvalue > 0.001
    assert run(load_scenario(data)).summary["jobs_submitted"] > 0


def test_stacks_scenario_is_the_outage_story_under_each_stack(scenarios_dir):
    """scenarios/stacks.yaml is scenarios/outage.yaml without its retry policy: every arm of
    its documented comparison is the outage story with that preset's policy."""
    outage = load_scenario(scenarios_dir / "outage.yaml")
    for name in ("sidekiq", "celery", "aws-standard", "envoy", "tenacity"):
        sc = load_scenario(scenarios_dir / "stacks.yaml", {"retry.preset": name})
        assert sc.downstream == outage.downstream and sc.workload == outage.workload
        assert sc.workers.count == outage.workers.count
        assert sc.retry.strategy == presets.get(name).fields["retry.strategy"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_fixed_retry_after_resynchronises_the_herd(scenarios_dir, seed):
    """scenarios/retry_after.yaml (cut to 25 s): sleeping exactly the server's 2 s brings
    every throttled caller back at once, wave after wave; keeping the policy's jittered
    sleep (never below 2 s) does not. Observed peak ratios 1.4-1.6 on these seeds; 1.25
    leaves room while a herd that did not re-form (ratio ~1) still fails the test."""
    runs = {ra: run(load_scenario(scenarios_dir / "retry_after.yaml",
                                  {"retry.retry_after": ra, "duration": "25s",
                                   "seed": str(seed)}))
            for ra in ("use", "at_least")}
    use, jittered = runs["use"], runs["at_least"]
    assert (use.sleeps["sleep"] == 2.0).all()  # every failure here is a 429 with 2 s
    spread = jittered.sleeps["sleep"]
    assert (spread >= 2.0).all() and (spread > 2.0).mean() > 0.99
    assert use.summary["peak_to_capacity"] > 1.25 * jittered.summary["peak_to_capacity"]
    assert use.summary["retries_total"] > jittered.summary["retries_total"]

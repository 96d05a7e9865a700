"""Retry budgets and client-side throttling: the pure objects against their published rules,
then the engine against the retry arithmetic they imply.

Sources of the rules: the AWS SDKs' standard retry mode (retry quota 500; botocore 1.44.8:
retry cost 14, 5 after a throttling error; botocore 1.43: retry cost 5, 10 after a timeout;
+1 per success without retry, a successful retry gives back what it took); gRPC retry
throttling (gRFC A6: token_count starts at max_tokens, -1 per failed RPC, +token_ratio per
successful one, clamped to [0, max_tokens], retries only while token_count > max_tokens/2);
Google SRE client-side throttling (reject with probability max(0, (requests - K*accepts) /
(requests + 1))); Finagle's retry budget (retries within a window <= ratio * requests + a
reserve).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.policies import budgets
from herdsim.policies.budgets.adaptive import AdaptiveThrottle
from herdsim.policies.budgets.ratio import RatioBudget
from herdsim.policies.budgets.token_bucket import PRESETS, TokenBucketBudget
from herdsim.policies.windows import TIME_BUCKETS
from herdsim.results.result import Result


def built(**fields):
    """The budget object a scenario's ``budget`` section builds."""
    cfg = TypeAdapter(budgets.Budget).validate_python(fields)
    return cfg.build(np.random.default_rng(0).random)


# -- presets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("preset", "costs"), [("aws", (14, 14, 5)), ("aws-1.43", (5, 10, 5))])
def test_aws_presets_are_the_sdk_standard_retry_quota(preset, costs):
    """botocore 1.44.8 retries/standard.py:704-706 (14, 5 after throttling, no timeout
    cost); botocore 1.43 retries/standard.py:677-681 @0e6e2404 (5, 10 after a timeout)."""
    b = built(kind="token_bucket", preset=preset)
    assert (b.capacity, b.tokens, b.success_refund) == (500, 500, 1)
    assert (b.retry_cost, b.timeout_cost, b.throttling_cost) == costs
    assert b.refund_retry_cost and b.failure_cost == 0 and b.floor == 0


@pytest.mark.parametrize(("preset", "plain", "timeouts", "throttles"),
                         [("aws", 35, 35, 100), ("aws-1.43", 100, 50, 100)])
def test_aws_quota_pays_for_capacity_over_cost_retries(preset, plain, timeouts, throttles):
    """500 tokens: aws pays for 35 retries at 14 (490), or 100 throttled ones at 5;
    aws-1.43 for 100 at 5, or 50 after timeouts at 10. The next one is refused."""
    for n, timed_out, throttled in ((plain, False, False), (timeouts, True, False),
                                    (throttles, False, True)):
        b = built(kind="token_bucket", preset=preset)
        assert [b.allow_retry(0, timed_out, throttled)[0] for _ in range(n + 1)] == \
            [True] * n + [False]


def test_aws_success_refunds_one_and_a_successful_retry_its_cost():
    b = built(kind="token_bucket", preset="aws")
    _, paid = b.allow_retry(0, False, True)
    assert paid == 5 and b.tokens == 495
    b.on_result(0, ok=True, paid=0)
    assert b.tokens == 496
    b.on_result(0, ok=True, paid=paid)
    assert b.tokens == 500
    b.on_result(0, ok=True, paid=0)
    assert b.tokens == 500  # never above capacity
    b.on_result(0, ok=False, paid=0)
    assert b.tokens == 500  # AWS charges retries, not failures


def test_throttling_cost_defaults_to_the_retry_cost():
    fields = {"capacity": 50, "retry_cost": 3, "timeout_cost": 7, "failure_cost": 0,
              "success_refund": 1, "refund_retry_cost": True, "floor": 0, "strict": False}
    assert built(kind="token_bucket", **fields).allow_retry(0, False, True) == (True, 3)
    again = built(kind="token_bucket", throttling_cost=2, **fields)
    assert again.allow_retry(0, False, True) == (True, 2)
    assert again.allow_retry(0, True, False) == (True, 7)


def test_grpc_preset_fields_are_max_tokens_and_token_ratio():
    b = built(kind="token_bucket", preset="grpc", capacity=100, success_refund=0.5)
    assert (b.capacity, b.tokens, b.success_refund, b.failure_cost) == (100, 100, 0.5, 1)
    assert b.floor == 50 and b.strict and b.retry_cost == 0


def test_grpc_retries_only_while_tokens_above_half():
    """max_tokens 10: after 4 failures (6 > 5) a retry goes; after the 5th (5 <= 5) not."""
    b = built(kind="token_bucket", preset="grpc")
    for _ in range(4):
        b.on_result(0, ok=False, paid=0)
    assert b.allow_retry(0, False)[0]
    b.on_result(0, ok=False, paid=0)
    assert not b.allow_retry(0, False)[0]
    for _ in range(10):  # ten successes at token_ratio 0.1 earn one token: 6 > 5
        b.on_result(0, ok=True, paid=0)
    assert b.allow_retry(0, False)[0]


# -- token bucket properties -------------------------------------------------------------------


outcomes = st.lists(st.tuples(st.sampled_from(["ok", "fail", "timeout", "throttled"]),
                              st.booleans()), max_size=300)


def drive(b: TokenBucketBudget, script):
    """Play *script*: each step is a call's outcome, and whether its job would retry on
    failure. Returns a log of (retry allowed, cost, refund earned by the step's success)."""
    log = []
    paid = 0.0
    for outcome, wants_retry in script:
        ok = outcome == "ok"
        b.on_result(0.0, ok, paid)
        refund = (paid if b.refund_retry_cost and paid else b.success_refund) if ok else 0.0
        allowed, cost = False, 0.0
        if not ok and wants_retry:
            allowed, cost = b.allow_retry(0.0, outcome == "timeout", outcome == "throttled")
            if allowed:
                assert cost == {"timeout": b.timeout_cost, "throttled": b.throttling_cost}.get(
                    outcome, b.retry_cost)
        paid = cost if allowed else 0.0  # the next step is this retry's result
        log.append((allowed, cost, refund))
    return log


@settings(max_examples=200, deadline=None)
@given(script=outcomes, capacity=st.floats(1, 600), retry_cost=st.floats(0.5, 20),
       extra=st.floats(0, 20), refund=st.floats(0, 3), refund_cost=st.booleans(),
       failure_cost=st.floats(0, 2), floor=st.floats(0, 0.9), strict=st.booleans())
def test_token_bucket_never_exceeds_its_budget_over_any_stretch(
        script, capacity, retry_cost, extra, refund, refund_cost, failure_cost, floor, strict):
    """Over every stretch i..j of any outcome script: tokens spent on allowed retries <=
    capacity - floor + refunds earned in the stretch; hence allowed retries <=
    (capacity + refunds) / retry_cost. The bucket never leaves [0, capacity]."""
    b = TokenBucketBudget(capacity, retry_cost, retry_cost + extra, failure_cost, refund,
                          refund_cost, floor, strict)
    log = drive(b, script)
    spent = np.concatenate([[0.0], np.cumsum([c for _, c, _ in log])])
    earned = np.concatenate([[0.0], np.cumsum([r for _, _, r in log])])
    count = np.concatenate([[0], np.cumsum([a for a, _, _ in log])])
    slack = 1e-9 * (1 + capacity + earned[-1])
    for i in range(len(log) + 1):
        assert np.all(spent[i:] - spent[i] <= capacity * (1 - floor) + earned[i:] - earned[i]
                      + slack)
        assert np.all((count[i:] - count[i]) * retry_cost
                      <= capacity + earned[i:] - earned[i] + slack)
    assert 0.0 <= b.tokens <= capacity


@settings(max_examples=200, deadline=None)
@given(script=outcomes, preset=st.sampled_from(["aws", "aws-1.43"]))
def test_aws_preset_matches_the_sdk_quota_rules(script, preset):
    """An independent transcription of the SDK quota decides every retry identically:
    1.44.8 costs 5 after a throttling error and 14 otherwise; 1.43 costs 10 after a timeout
    and 5 otherwise."""
    b = built(kind="token_bucket", preset=preset)
    tokens, paid = 500.0, 0.0
    for outcome, wants_retry in script:
        b.on_result(0.0, outcome == "ok", paid)
        if outcome == "ok":
            tokens = min(500.0, tokens + (paid if paid else 1.0))
        paid = 0.0
        if outcome != "ok" and wants_retry:
            if preset == "aws":
                cost = 5.0 if outcome == "throttled" else 14.0
            else:
                cost = 10.0 if outcome == "timeout" else 5.0
            expect = cost <= tokens
            allowed, _ = b.allow_retry(0.0, outcome == "timeout", outcome == "throttled")
            assert allowed == expect
            if allowed:
                tokens -= cost
                paid = cost
        assert b.tokens == pytest.approx(tokens)


@settings(max_examples=200, deadline=None)
@given(script=outcomes, max_tokens=st.integers(1, 20),
       ratio=st.sampled_from([0.1, 0.25, 0.5, 1.0]))
def test_grpc_preset_matches_the_throttling_rules(script, max_tokens, ratio):
    """gRFC A6 transcribed: decrement per failure, +ratio per success, clamp, retry only
    while tokens > max_tokens / 2."""
    b = built(kind="token_bucket", preset="grpc", capacity=max_tokens, success_refund=ratio)
    tokens = float(max_tokens)
    for outcome, wants_retry in script:
        ok = outcome == "ok"
        b.on_result(0.0, ok, 0.0)
        tokens = min(max_tokens, tokens + ratio) if ok else max(0.0, tokens - 1)
        if not ok and wants_retry:
            assert b.allow_retry(0.0, outcome == "timeout")[0] == (tokens > max_tokens / 2)
        assert b.tokens == pytest.approx(tokens)


# -- adaptive throttle -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(accepts=st.integers(0, 200), rejects=st.integers(0, 200), k=st.floats(0.5, 4))
def test_adaptive_rejection_probability_is_the_sre_formula(accepts, rejects, k):
    throttle = AdaptiveThrottle(120.0, k, lambda: 0.5)
    for _ in range(accepts):
        throttle.on_result(1.0, True, 0.0)
    for _ in range(rejects):
        throttle.on_result(1.0, False, 0.0)
    requests = accepts + rejects
    assert throttle.rejection_probability(2.0) == pytest.approx(
        max(0.0, (requests - k * accepts) / (requests + 1)))


def test_adaptive_empirical_rejections_follow_the_formula():
    """4,000 calls against a backend accepting 30% of what it gets (< 1/K: the throttle
    tightens as it goes). Each call is refused with p_i = max(0, (R - K*A)/(R + 1)), R and A
    counted here independently (a refused call counts as a request, not an accept), so the
    number refused has mean sum(p_i) and variance sum(p_i(1 - p_i)). Fixed seed; the
    tolerance is 4 standard deviations (a correct throttle fails it with probability
    ~6e-5 over seeds); a throttle whose p is 5% too high or low moves the count by about
    5.5 sd (checked by scaling p)."""
    rng = np.random.default_rng(2024)
    backend = np.random.default_rng(7)
    k = 2.0
    throttle = AdaptiveThrottle(120.0, k, rng.random)
    requests, accepts = 0, 0
    for _ in range(100):  # a warm start: 100 requests, 40 accepted (p = 20/101)
        ok = accepts < 40
        throttle.on_result(0.5, ok, 0.0)
        requests, accepts = requests + 1, accepts + ok
    mean = var = 0.0
    refused = 0
    for i in range(4000):
        now = 1.0 + i * 0.02  # 80 s: every event stays inside the 120 s window
        p = max(0.0, (requests - k * accepts) / (requests + 1))
        mean += p
        var += p * (1 - p)
        requests += 1
        if throttle.allow_call(now):
            ok = bool(backend.random() < 0.3)
            throttle.on_result(now, ok, 0.0)
            accepts += ok
        else:
            refused += 1
    assert 0.4 < refused / 4000 < 0.99  # the throttle is neither idle nor saturated
    assert abs(refused - mean) <= 4 * math.sqrt(var), (refused, mean, math.sqrt(var))


def test_adaptive_forgets_after_its_window():
    throttle = AdaptiveThrottle(10.0, 2.0, lambda: 0.0)
    for _ in range(50):
        throttle.on_result(1.0, False, 0.0)
    assert throttle.rejection_probability(1.0) == pytest.approx(50 / 51)
    assert throttle.rejection_probability(12.0) == 0.0


# -- ratio budget ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(script=st.lists(st.tuples(st.integers(0, 64 * 30), st.booleans()), max_size=300),
       ratio=st.sampled_from([0.1, 0.2, 0.5, 1.0]), per_second=st.sampled_from([0.0, 0.5, 2]),
       window=st.sampled_from([2.5, 10.0]))
def test_ratio_budget_bounds_retries_by_first_tries_over_every_window(
        script, ratio, per_second, window):
    """An allowed retry at t: retries allowed in (t - W + w, t], itself included, <=
    ratio * first tries in (t - W, t] + min_per_second * W (w = W/20, the window's bucket
    resolution). A refused retry: one more retry would break the same bound with the
    roles of the two intervals swapped (the budget is not stricter than its rule)."""
    budget = RatioBudget(window, ratio, per_second)
    w = window / TIME_BUCKETS
    firsts, retries = [], []
    for tick, is_retry in sorted(script):
        now = tick / 64
        if not is_retry:
            budget.on_result(now, ok=False, paid=0.0)
            firsts.append(now)
            continue
        allowed, _ = budget.allow_retry(now, False)
        reserve = per_second * window
        if allowed:
            retries.append(now)
            recent = sum(now - window + w < t <= now for t in retries)
            assert recent <= ratio * sum(now - window < t <= now for t in firsts) + reserve
        else:
            recent = sum(now - window < t <= now for t in retries)
            assert recent + 1 > ratio * sum(now - window + w < t <= now for t in firsts) \
                + reserve


# -- in the engine -------------------------------------------------------------------------------


def down_all_run(make_scenario, **budget) -> dict:
    """A downstream down for the whole 4 s run: every call fails fast, no token comes back;
    retries are unlimited, so only the budget stops them."""
    return make_scenario(
        duration="4s", workload={"arrivals": "constant", "rate": 100},
        workers={"count": 3},
        downstream={"outages": [{"start": 0, "duration": "4s", "mode": "down"}]},
        retry={"strategy": "fixed", "base": "20ms", "max_retries": None},
        budget=budget)


@pytest.mark.parametrize(("scope", "owners"), [("pool", 1), ("worker", 3)])
@pytest.mark.parametrize("preset", ["aws", "aws-1.43"])
def test_aws_quota_in_the_engine_allows_capacity_over_cost_retries(make_scenario, scope,
                                                                   owners, preset):
    """No success ever refunds: exactly floor(500 / retry_cost) retries per bucket (an
    outage's fast failure is not a throttling error), then every failure is refused and
    dead-lettered; the series and the summary agree."""
    result = herdsim.run(herdsim.load_scenario(
        down_all_run(make_scenario, kind="token_bucket", preset=preset, scope=scope)))
    s, ts = result.summary, result.timeseries
    assert len(result.sleeps) == 500 // PRESETS[preset]["retry_cost"] * owners
    assert ts["budget_refused"].sum() == s["budget_refused_total"] > 0
    assert s["jobs_dead_lettered"] == s["budget_refused_total"]
    assert s["jobs_succeeded"] == 0


def test_refused_jobs_are_recycled_without_a_dlq(make_scenario):
    data = down_all_run(make_scenario, kind="token_bucket", preset="aws")
    data["dlq"] = {"enabled": False, "redelivery_delay": "100ms"}
    s = herdsim.run(herdsim.load_scenario(data)).summary
    assert s["jobs_dead_lettered"] == 0
    assert s["recycled_total"] == s["budget_refused_total"] > 0


@pytest.mark.parametrize(("preset", "retries"), [("aws", 35), ("aws-1.43", 50)])
def test_a_blackhole_charges_the_timeout_cost(make_scenario, preset, retries):
    """Calls time out: each retry costs 14 (aws) or 10 (aws-1.43), so the 500-token quota
    pays for 35 or 50."""
    data = down_all_run(make_scenario, kind="token_bucket", preset=preset)
    data["downstream"] = {"timeout": "50ms", "outages": [
        {"start": 0, "duration": "4s", "mode": "blackhole"}]}
    data["workers"]["count"] = 20
    result = herdsim.run(herdsim.load_scenario(data))
    assert len(result.sleeps) == retries
    assert result.summary["budget_refused_total"] > 0


@pytest.mark.parametrize("mode", ["sleep", "requeue"])
def test_a_successful_retry_gets_back_what_it_paid_in_every_retry_mode(make_scenario, mode):
    """A bucket with no first-try refund and a full refund of a successful retry's cost:
    tokens at the end = capacity - 5 * retries allowed + 5 * retries that succeeded,
    exactly (refunds never exceed what was paid, so the capacity never clips them).
    In ``requeue`` mode the retry runs in a later pass of the job, which must still know
    what it paid."""
    data = make_scenario(
        duration="6s", workload={"rate": 300},
        workers={"count": 50, "retry_mode": mode, "poll_interval": "50ms"},
        downstream={"concurrency": 50, "service": {"mean": "10ms"},
                    "outages": [{"start": 0, "duration": "6s", "mode": "error",
                                 "error_rate": 0.5}]},
        retry={"strategy": "fixed", "base": "50ms", "max_retries": 3},
        budget={"kind": "token_bucket", "capacity": 500, "retry_cost": 5, "timeout_cost": 5,
                "failure_cost": 0, "success_refund": 0, "refund_retry_cost": True,
                "floor": 0, "strict": False})
    sim = Simulation(herdsim.load_scenario(data))
    result = Result.from_finished(sim.run())
    jobs = result.jobs
    succeeded_retries = int(((jobs["outcome"] == "succeeded") & (jobs["attempts"] > 1)).sum())
    tokens = sim.budget_for(None).tokens
    assert succeeded_retries > 30 and result.summary["budget_refused_total"] > 0
    assert tokens == 500 - 5 * len(result.sleeps) + 5 * succeeded_retries


def independent_failures(make_scenario, p: float, n: int, **extra) -> dict:
    """Open-loop callers (no pool limit) against a downstream with ample capacity whose
    every call fails independently with probability *p* for the whole run."""
    return make_scenario(
        duration="12s", workload={"arrivals": "poisson", "rate": 700},
        workers={"count": None},
        downstream={"concurrency": 200, "queue_limit": None,
                    "service": {"distribution": "constant", "mean": "5ms"},
                    "outages": [{"start": 0, "duration": "12s", "mode": "error",
                                 "error_rate": p}]},
        retry={"strategy": "fixed", "base": "10ms", "max_retries": n}, **extra)


def finished_early(result, margin: float = 1.0):
    """Jobs that arrived at least *margin* s before the end: all of them must be finished
    (a job takes at most (N+1)*5 ms + N*10 ms here), so no pending-job bias."""
    jobs = result.jobs
    early = jobs[jobs["arrival"] < result.scenario.duration - margin]
    assert (early["outcome"] != "pending").all()
    return early


def test_an_aws_quota_that_never_runs_dry_changes_nothing(make_scenario):
    """p = 0.2, N = 3: per job the quota earns 0.8 (first-try successes) and loses
    14 * (p^2 + p^3 + p^4) = 0.69 (retries that fail), so it stays full and refuses
    nothing: the unbudgeted retry arithmetic holds (tests/model/test_theory_extra.py checks it
    without a budget) -- success fraction 1 - p^(N+1), calls per job sum_{k<=N} p^k, whose
    law is truncated geometric, P(c = k) = p^(k-1)(1-p) for k <= N, P(c = N+1) = p^N.
    Both within 4 standard errors (~7,700 jobs)."""
    p, n = 0.2, 3
    result = herdsim.run(herdsim.load_scenario(independent_failures(
        make_scenario, p, n, budget={"kind": "token_bucket", "preset": "aws"})))
    assert result.summary["budget_refused_total"] == 0
    early = finished_early(result)
    jobs = len(early)
    success = 1 - p ** (n + 1)
    se = math.sqrt(success * (1 - success) / jobs)
    assert abs((early["outcome"] == "succeeded").mean() - success) <= 4 * se
    k = np.arange(1, n + 2)
    law = np.where(k <= n, p ** (k - 1) * (1 - p), p**n)
    mean = float((k * law).sum())
    assert mean == pytest.approx(sum(p**i for i in range(n + 1)))
    sd = math.sqrt(float((k**2 * law).sum()) - mean**2)
    assert abs(early["attempts"].mean() - mean) <= 4 * sd / math.sqrt(jobs)


def test_an_aws_quota_that_runs_dry_pays_failed_retries_with_first_try_successes(
        make_scenario):
    """p = 0.6, N = 3: the quota loses ~10 tokens per job and earns 0.4, so it empties and
    refuses retries. Token conservation: 500 + first-try successes - 14 * retries that did
    not succeed (those in flight included: they paid) = tokens left + tokens clipped at
    capacity. Nothing is clipped once the first retry has paid (only successes in the
    first ~2 ms, while the bucket is full, can be): allowed slack 10 tokens."""
    p, n = 0.6, 3
    sim = Simulation(herdsim.load_scenario(independent_failures(
        make_scenario, p, n, budget={"kind": "token_bucket", "preset": "aws"})))
    result = Result.from_finished(sim.run())
    jobs = result.jobs
    first_ok = int(((jobs["outcome"] == "succeeded") & (jobs["attempts"] == 1)).sum())
    retried_ok = int(((jobs["outcome"] == "succeeded") & (jobs["attempts"] > 1)).sum())
    unrefunded = len(result.sleeps) - retried_ok
    assert result.summary["budget_refused_total"] > 1000
    assert 14 * unrefunded <= 500 + first_ok  # the budget, never exceeded
    clipped = 500 + first_ok - 14 * unrefunded - sim.budget_for(None).tokens
    assert 0 <= clipped <= 10, clipped

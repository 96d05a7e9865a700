"""One attempt's decisions (:mod:`herdsim.policies.attempt`), written once: their rules
checked against the retry section that states them, and their users (the testbed's
asyncio workers) held to the same rules as the simulation.

* the retry step gives up exactly where the section says (max retries, a poison job, a
  failure not in ``retry_on``, the budget refusing), calling ``give_up`` once and
  recording no sleep; otherwise it records the sleep it returns, one retry later;
* Retry-After is heeded after a 429/503 only, and only when the caller reads hints;
* a propagated deadline: the call's timeout is the smaller of the caller's and what is
  left, and nothing left means not sent;
* the testbed's worker dead-letters a failure its client does not retry after one
  attempt, as the model's worker does (it used to retry every failure).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from herdsim.config.loading import load_scenario
from herdsim.policies.attempt import RetryHooks, RetryRules, call_timeout, retry_step
from herdsim.policies.outcomes import ERROR, REJECTED, THROTTLED, TIMEOUT

BASE = {"name": "a", "seed": 1, "duration": "1s", "workload": {"rate": 1},
        "workers": {"count": 1}, "downstream": {"concurrency": 1, "timeout": "1s"}}


def _retry(**fields):
    return load_scenario({**BASE, "retry": fields}).retry


class Job:
    def __init__(self, poison: bool = False, retries: int = 0):
        self.id, self.poison, self.retries, self.prev, self.paid = 7, poison, retries, 0.1, 0.0


class Log:
    """The hooks' side: what the step gave up, slept and refused."""

    def __init__(self, hint: float | None = None):
        self.gave_up: list = []
        self.sleeps: list = []
        self.refused: list = []
        self.retry_after = hint

    def hooks(self, hints: bool = True) -> RetryHooks:
        return RetryHooks(lambda job, now: self.gave_up.append((job, now)),
                          lambda *row: self.sleeps.append(row), self.refused.append,
                          self if hints else None)


class Budget:
    def __init__(self, allowed: bool):
        self.allowed, self.asked = allowed, []

    def allow_retry(self, now, timed_out, throttled):
        self.asked.append((timed_out, throttled))
        return self.allowed, 2.5


@given(max_retries=st.integers(0, 6), retries=st.integers(0, 8))
def test_the_step_retries_until_max_retries_then_gives_up_once(max_retries, retries):
    log = Log()
    step = retry_step(RetryRules.of(_retry(max_retries=max_retries, strategy="fixed"),
                                    np.random.default_rng(0)), log.hooks())
    job = Job(retries=retries)
    pause = step(job, 3.0, ERROR, None)
    if retries >= max_retries:
        assert pause is None and log.gave_up == [(job, 3.0)] and not log.sleeps
        assert job.retries == retries
    else:
        assert pause is not None and not log.gave_up
        assert log.sleeps == [(3.0, job.id, retries, pause)] and job.retries == retries + 1


@pytest.mark.parametrize("outcome, retried", [(ERROR, False), (TIMEOUT, True),
                                              (THROTTLED, True)])
def test_a_failure_not_in_retry_on_gives_up_at_once(outcome, retried):
    log = Log()
    rules = RetryRules.of(_retry(retry_on=["timeout", 429]), np.random.default_rng(0))
    assert rules.gives_up(Job(), outcome) is not retried
    assert (retry_step(rules, log.hooks())(Job(), 0.0, outcome, None) is not None) is retried
    assert len(log.gave_up) == (not retried)


def test_a_poison_job_that_may_not_retry_gives_up():
    log = Log()
    rules = RetryRules.of(_retry(poison_retryable=False), np.random.default_rng(0))
    assert retry_step(rules, log.hooks())(Job(poison=True), 1.0, ERROR, None) is None
    assert len(log.gave_up) == 1


@pytest.mark.parametrize("allowed", [True, False])
def test_the_budget_is_asked_with_the_failure_s_class_and_its_refusal_gives_up(allowed):
    log, budget = Log(), Budget(allowed)
    rules = RetryRules.of(_retry(throttling=[429]), np.random.default_rng(0))
    job = Job()
    pause = retry_step(rules, log.hooks())(job, 4.0, THROTTLED, budget)
    assert budget.asked == [(False, True)]
    assert job.paid == 2.5  # what the budget took travels with the job
    assert (pause is not None) is allowed
    assert log.refused == ([] if allowed else [4.0])
    assert len(log.gave_up) == (not allowed)


@pytest.mark.parametrize("outcome, heeded", [(THROTTLED, True), (REJECTED, True),
                                             (ERROR, False), (TIMEOUT, False)])
@pytest.mark.parametrize("hints", [True, False])
def test_retry_after_is_heeded_after_a_refusal_only_and_only_with_hints(outcome, heeded, hints):
    """``retry_after: use`` sleeps the hint (9 s, far from a 0.1 s fixed sleep)."""
    log = Log(hint=9.0)
    rules = RetryRules.of(_retry(strategy="fixed", retry_after="use"), np.random.default_rng(0))
    pause = retry_step(rules, log.hooks(hints))(Job(), 0.0, outcome, None)
    assert pause == (9.0 if heeded and hints else 0.1)


@given(timeout=st.none() | st.floats(0.001, 100), deadline=st.floats(0, 100),
       now=st.floats(0, 100))
def test_a_propagated_deadline_shortens_the_timeout_to_what_is_left(timeout, deadline, now):
    got = call_timeout(timeout, deadline, now)
    left = deadline - now
    if left <= 0:
        assert got is False
    else:
        assert got is not False and got is not None and got <= left
        assert got == (left if timeout is None else min(timeout, left))


def test_without_a_deadline_the_timeout_is_the_caller_s():
    assert call_timeout(2.0, None, 50.0) == 2.0 and call_timeout(None, None, 1.0) is None


class FakeRedis:
    def __init__(self):
        self.dlq, self.delayed = [], []

    async def rpush(self, _key, payload):
        self.dlq.append(payload)

    async def zadd(self, _key, mapping):
        self.delayed.extend(mapping)


@pytest.mark.parametrize("retry_on, attempts", [(["timeout"], 1), (["timeout", 500], 3)])
def test_the_testbed_worker_does_not_retry_what_its_client_does_not(retry_on, attempts):
    """A downstream answering 500 to every call; a client retrying twice at most with
    zero sleeps. Retrying 500s, the job ends dead-lettered after 3 attempts; not retrying
    them, after 1 (the testbed retried every failure before it used the model's step)."""
    pytest.importorskip("aiohttp")
    from herdsim.testbed.jobs import WireJob
    from herdsim.testbed.timing import Clock, Lateness
    from herdsim.testbed.workers import WorkerPool

    sc = load_scenario({**BASE, "duration": "60s", "dlq": {"enabled": True},
                        "retry": {"strategy": "fixed", "base": "1ms", "max_retries": 2,
                                  "retry_on": retry_on}})
    redis = FakeRedis()
    pool = WorkerPool(sc, 1, 0, redis, "http://unused", Clock(time.monotonic()), Lateness())
    calls = []

    async def answer(*_):  # the job, when it was due, whether a retry
        calls.append(1)
        return ERROR, None

    pool._call = answer  # type: ignore[method-assign]
    job = WireJob(id=0, poison=False, attempts=0, retries=0, prev=sc.retry.base)
    assert asyncio.run(pool._run_job(job, None, None, 60.0))
    assert len(calls) == attempts == job.attempts
    assert len(redis.dlq) == 1 and not redis.delayed
    assert list(pool.finished["attempts"]) == [attempts]


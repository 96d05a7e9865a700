"""The decisions of one attempt, written once, without SimPy: what a client does around
one call.

- :func:`call_timeout`: before it leaves, the call's timeout (the caller's own, or what is
  left of the deadline it serves; nothing left: it is not sent);
- :func:`heard_step`: after an answer, what the guards learn from it (the breaker, the
  client rate limiter, the budget, which keeps or refunds what the attempt paid);
- :func:`retry_step`: after a failure, the sleep before the next attempt, or giving up
  (max retries, a poison job that may not retry, a failure not retried, the budget
  refusing the retry), the sleep drawn by the retry policy (the strategy, the throttling
  strategy, the retry bucket, the server's Retry-After).

The simulation's loops (queue workers, open-loop callers, a call graph's edges) and the
testbed's asyncio workers build their steps here from the same :class:`RetryRules`, each
handing in, through a small typed context (:class:`RetryHooks`), what the step touches
on its side: where a job that gives up goes, where sleeps are recorded, where a
Retry-After is read. A job is anything with ``id``, ``poison``, ``retries``, ``prev`` and
``paid`` (:class:`Attempted`). The steps are closures with their rules bound once: they
are the hot path of a retry storm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from herdsim.policies import retry_after
from herdsim.policies.backoff import Strategy
from herdsim.policies.outcomes import HINTED, STATUS, TIMEOUT
from herdsim.policies.workqueue import Bucket


class Attempted(Protocol):
    """What the steps read and write of the job (or edge call) making attempts."""

    id: int
    poison: bool
    retries: int  # retries so far (the strategy's attempt index)
    prev: Any  # the strategy's memory: the previous sleep, or its state
    paid: float  # what the budget took for the retry now in flight


class Hints(Protocol):
    """Where a client reads the Retry-After of the answer it just had."""

    retry_after: float | None


def classes(retry: Any) -> tuple[frozenset[int], frozenset[int]]:
    """The outcomes a client with the retry section *retry* does not retry
    (``retry_on``), and those it treats as throttling (``throttling``, among the answers
    429 and 503)."""
    skipped = frozenset(o for o, status in STATUS.items() if status not in retry.retry_on)
    throttling = frozenset(o for o in HINTED if STATUS[o] in retry.throttling)
    return skipped, throttling


@dataclass(frozen=True)
class RetryRules:
    """A retry section at run time: its limits, its failure classes and its policy
    objects (made by :meth:`of`)."""

    max_retries: int | None
    poison_retryable: bool
    base: float  # a new job's (or a forgotten key's) strategy memory
    skipped: frozenset[int]  # failures given up at once (not in ``retry_on``)
    throttling: frozenset[int]  # failures that are throttling
    strategy: Strategy
    throttling_strategy: Strategy | None  # after a throttling answer, when its base differs
    rng: np.random.Generator
    heed: Callable[[float, float], float] | None  # Retry-After meets the drawn sleep
    bucket: Bucket | None  # client-go's shared bucket: the sleep is at least its delay

    @classmethod
    def of(cls, retry: Any, rng: np.random.Generator) -> RetryRules:
        """The rules of the scenario's retry section *retry* (the workers', or an
        edge's), drawing sleeps from *rng*."""
        skipped, throttling = classes(retry)
        return cls(
            max_retries=retry.max_retries, poison_retryable=retry.poison_retryable,
            base=retry.base, skipped=skipped, throttling=throttling, strategy=retry.build(),
            throttling_strategy=(retry.build(throttling=True)
                                 if retry.throttling_base is not None else None),
            rng=rng, heed=retry_after.rule(retry.retry_after, retry.retry_after_limit),
            bucket=Bucket(retry.bucket.rate, retry.bucket.burst) if retry.bucket else None)

    def gives_up(self, job: Attempted, outcome: int) -> bool:
        """Whether *job* gives up after *outcome* before any budget is asked (a poison
        job that may not retry, max retries spent, a failure not retried)."""
        return ((job.poison and not self.poison_retryable)
                or (self.max_retries is not None and job.retries >= self.max_retries)
                or outcome in self.skipped)


@dataclass(frozen=True)
class RetryHooks:
    """What the retry step touches on its caller's side."""

    give_up: Callable[[Any, float], None]  # (job, now): the job fails for good
    record_sleep: Callable[[float, int, int, float], None]  # (now, job id, retry, sleep)
    budget_refused: Callable[[float], None]  # (now): the budget refused a retry
    hints: Hints | None  # the Retry-After of the last answer (None: never heeded)


RetryStep = Callable[[Any, float, int, Any], "float | None"]


def retry_step(rules: RetryRules, hooks: RetryHooks) -> RetryStep:
    """``retry(job, now, outcome, budget)``: after a failed attempt, the sleep before the
    next one (recorded), or None when the job gives up instead (``hooks.give_up`` called:
    :meth:`RetryRules.gives_up`, or *budget*, if any, refusing the retry). *budget*
    answers at once (``allow_retry(now, timed_out, throttled) -> (allowed, paid)``)."""
    give_up, record_sleep, budget_refused = hooks.give_up, hooks.record_sleep, \
        hooks.budget_refused
    max_retries, poison_retryable = rules.max_retries, rules.poison_retryable
    draw, stateful, rng = rules.strategy.sleep, rules.strategy.stateful, rules.rng
    throttling = rules.throttling
    not_retried = rules.skipped or None  # (None: every failure is retried, one check less)
    throttling_draw = rules.throttling_strategy.sleep if rules.throttling_strategy else None
    hints, bucket = hooks.hints, rules.bucket
    heed = rules.heed if hints is not None else None

    def retry(job, now, outcome, budget):
        n = job.retries
        if (job.poison and not poison_retryable) or (
            max_retries is not None and n >= max_retries
        ) or (not_retried is not None and outcome in not_retried):
            give_up(job, now)
            return None
        throttled = outcome in throttling
        if budget is not None:
            allowed, job.paid = budget.allow_retry(now, outcome == TIMEOUT, throttled)
            if not allowed:
                budget_refused(now)
                give_up(job, now)
                return None
        sleep = throttling_draw if throttled and throttling_draw else draw
        if stateful:
            pause, job.prev = sleep(n, job.prev, rng)
        else:
            pause = job.prev = sleep(n, job.prev, rng)
        if bucket is not None:  # client-go's MaxOf(item exponential, bucket)
            pause = max(pause, bucket.reserve(now))
        if heed is not None and outcome in HINTED:  # an answer that carries the header
            hint = hints.retry_after  # type: ignore[union-attr]  # (heed: hints given)
            if hint is not None:
                pause = heed(pause, hint)
        job.retries = n + 1
        record_sleep(now, job.id, n, pause)
        return pause

    return retry


Heard = Callable[[Any, float, float, Any, bool, Any, Any, Any], None]


def heard_step(slow_threshold: float | None, throttling: frozenset[int]) -> Heard:
    """``heard(job, started, now, outcome, failed, breaker, limiter, budget)``: what the
    guards (each None when absent) learn from an answer: the breaker (a failure, or a
    call slower than *slow_threshold*), the client limiter (a *throttling* answer), and
    the budget (which refunds or keeps what the job paid)."""

    def heard(job, started, now, outcome, failed, breaker, limiter, budget):
        if breaker is not None:
            breaker.record(now, failed,
                           slow_threshold is not None and now - started >= slow_threshold)
        if limiter is not None:
            limiter.after_response(now, outcome in throttling)
        if budget is not None:
            budget.on_result(now, not failed, job.paid)
            job.paid = 0.0

    return heard


def call_timeout(timeout: float | None, deadline: float | None,
                 now: float) -> float | None | bool:
    """The timeout of a call sent at *now* under a propagated *deadline* (None: the call
    it serves has none): the caller's *timeout*, or what is left of the deadline when
    that is less; ``False`` when nothing is left (the call is not sent)."""
    if deadline is None:
        return timeout
    left = deadline - now
    if left <= 0.0:
        return False
    return left if timeout is None or left < timeout else timeout


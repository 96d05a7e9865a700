"""A worker process: asyncio workers taking jobs from Redis and calling the downstream.

Each worker BLPOPs a job from the main queue, calls ``/call`` over HTTP (aiohttp, one
session, the scenario's ``downstream.timeout`` as the client timeout), and then, as the
model's worker does (:mod:`herdsim.model.worker`): succeeds, or retries by the model's
own retry step (:func:`herdsim.policies.attempt.retry_step`: the scenario's strategy
objects, presets included, ``retry_on``, throttling and Retry-After), holding the job
through the sleep (``retry_mode: sleep``) or parking it in the delayed set with ZADD at
its due time (``requeue``), or gives up to the DLQ list (or, DLQ off, back to the queue
after ``dlq.redelivery_delay``). A breaker and a budget are the policies' own objects
(``scope: worker``: each worker its own), or, ``scope: pool``, one shared by every worker
of every process through Redis, as the simulation shares one across the pool
(:mod:`herdsim.testbed.shared`; call :meth:`WorkerPool.setup` first).

The process stops at the run's end: a job still in hand then is pending, with its
attempts. Everything is logged as times since ``t0``.
"""

from __future__ import annotations

import asyncio
from array import array

import aiohttp
import numpy as np

from herdsim.config.scenario import Scenario
from herdsim.model.calls import DOWN, ERROR, OK, REJECTED, THROTTLED, TIMEOUT
from herdsim.model.job_streams import JobStreams, per_job
from herdsim.model.recorder import DEAD_LETTERED, SUCCEEDED
from herdsim.model.streams import draws
from herdsim.policies.attempt import RetryHooks, RetryRules, retry_step
from herdsim.policies.breaker import CLOSED
from herdsim.testbed.emulator import OUTCOME_NAMES
from herdsim.testbed.jobs import DELAYED, DLQ, MAIN, WireJob
from herdsim.testbed.server import JOB_HEADER, TIMES_HEADER
from herdsim.testbed.shared import LocalBreaker, LocalBudget, SharedBreaker, SharedBudget
from herdsim.testbed.timing import Clock, Lateness

OUTCOMES = {200: OK, 500: ERROR, 429: THROTTLED, 504: TIMEOUT}
STOP_GRACE = 0.5  # s after the end that calls in flight get before they are cancelled
EVENTS = ("timeouts", "short_circuited", "budget_refused", "recycled")
TURNAROUND = ("due", "start", "arrive", "leave", "end", "retry")
NOT_SERVED = float("nan")  # no X-Times: the call never reached the handler


class LastAnswer:
    """The Retry-After the last answer carried (the retry step's ``hints``)."""

    retry_after: float | None = None


class Answered:
    """A budget's answer to a retry, asked before the retry step runs (the step asks a
    budget that answers at once; the testbed's may have to ask Redis)."""

    def __init__(self, answer: tuple[bool, float]):
        self._answer = answer

    def allow_retry(self, _now: float, _timed_out: bool, _throttled: bool) -> tuple[bool, float]:
        return self._answer


def _later(_job: WireJob, _now: float) -> None:
    """The retry step's ``give_up``: a worker gives up after the step (it awaits Redis)."""


class WorkerPool:
    """``count`` asyncio workers in one process, and what they log."""

    def __init__(self, scenario: Scenario, count: int, index: int, redis, url: str,
                 clock: Clock, lateness: Lateness):
        self.scenario = scenario
        self.count = count
        self.redis = redis
        self.url = url
        self.clock = clock
        self.lateness = lateness
        streams = JobStreams(scenario.seed)  # each job's jitter, as the comparison's
        self.rules = RetryRules.of(scenario.retry, streams.generator())  # simulation draws it
        self.last = LastAnswer()  # the Retry-After of the answer a retry follows
        self.retry = per_job(retry_step(self.rules, RetryHooks(
            _later, self._record_sleep, self._budget_refused, self.last)), streams)
        draw_rng = np.random.default_rng(np.random.SeedSequence([scenario.seed, index, 1]))
        self._draw = draws(lambda n: draw_rng.random(n))
        self.sleeping = 0
        self.in_flight = 0
        self.calls = dict.fromkeys(OUTCOME_NAMES.values(), 0)  # by the outcome seen here
        self.in_hand: dict[int, WireJob] = {}
        self.log = {name: array("d") for name in (*EVENTS, "sleeping", "breaker_open",
                                                  "breaker_trips")}
        self.finished = {name: array("d") for name in ("id", "time", "attempts", "outcome")}
        self.sleeps = {name: array("d") for name in ("time", "job", "attempt", "sleep")}
        # per attempt: when it was due (dequeued, or its retry sleep ended), when the
        # worker sent it, when the server's handler got it and let it go, when the answer
        # was read; retry: 0 for a first try (calibrate.turnaround)
        self.turnaround = {name: array("d") for name in TURNAROUND}
        self.breakers: list[LocalBreaker | SharedBreaker] = []
        breaker, budget = scenario.breaker, scenario.budget
        self._pool_breaker = (SharedBreaker(redis, breaker.build())
                              if breaker.enabled and breaker.scope == "pool" else None)
        if self._pool_breaker is not None:
            self.breakers.append(self._pool_breaker)
        self._pool_budget = (SharedBudget(redis, budget.build(self._draw), self._draw)
                             if budget is not None and budget.scope == "pool" else None)

    async def setup(self) -> None:
        """Create the pool's shared breaker and budget in Redis (the first process to
        come does; the others find them)."""
        for shared in (self._pool_breaker, self._pool_budget):
            if shared is not None:
                await shared.init()

    def _breaker(self) -> LocalBreaker | None:
        if not self.scenario.breaker.enabled:
            return None
        breaker = LocalBreaker(self.scenario.breaker.build())
        self.breakers.append(breaker)
        return breaker

    def _budget(self) -> LocalBudget | None:
        cfg = self.scenario.budget
        return LocalBudget(cfg.build(self._draw)) if cfg is not None else None

    async def run(self) -> None:
        end = self.scenario.duration
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        timeout = aiohttp.ClientTimeout(total=self.scenario.downstream.timeout)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            self.session = session
            workers = [asyncio.create_task(self._worker(end)) for _ in range(self.count)]
            probes = [asyncio.create_task(self._gauges(end)),
                      asyncio.create_task(self.lateness.probe_loop(self.clock, end))]
            await self.clock.sleep_until(end + STOP_GRACE)
            for task in workers + probes:
                task.cancel()
            await asyncio.gather(*workers, *probes, return_exceptions=True)
            for breaker in self.breakers:
                await breaker.stop_waiting()
        trips = [await breaker.trips() for breaker in self.breakers]
        self.log["breaker_trips"].append(float(sum(trips)))

    async def _gauges(self, end: float) -> None:
        width, k = self.scenario.bin, 0
        while k * width < end:
            await self.clock.sleep_until(k * width)
            self.log["sleeping"].append(self.sleeping)
            self.log["breaker_open"].append(self.breaker_open())
            k += 1

    def breaker_open(self) -> float:
        """The fraction of this process's breakers that are not closed."""
        breakers = self.breakers
        return sum(b.state != CLOSED for b in breakers) / len(breakers) if breakers else 0.0

    async def _worker(self, end: float) -> None:
        breaker = self._pool_breaker or self._breaker()
        budget = self._pool_budget or self._budget()
        redis, now = self.redis, self.clock.now
        while now() < end:
            if breaker is not None and await breaker.blocked(now()):
                await self._wait_breaker(breaker)
                continue
            item = await redis.blpop([MAIN], timeout=max(0.01, min(1.0, end - now())))
            if item is None:
                continue
            job = WireJob.decode(item[1])
            self.in_hand[job.id] = job
            if await self._run_job(job, breaker, budget, end):
                del self.in_hand[job.id]

    async def _wait_breaker(self, breaker: LocalBreaker | SharedBreaker) -> None:
        """Wait until the breaker lets calls through again (with this process's other
        waiters), then ``resume_jitter``."""
        await breaker.wait_unblocked(self.clock.now)
        jitter = self.scenario.breaker.resume_jitter
        if jitter:
            await asyncio.sleep(jitter * self._draw())

    async def _call(self, job: WireJob, due: float, retry: bool) -> tuple[int, float | None]:
        self.in_flight += 1
        start = self.clock.now()
        served = (NOT_SERVED, NOT_SERVED)
        try:
            outcome, hint, served = await self._http_call(job)
        finally:
            self.in_flight -= 1
            for name, value in zip(TURNAROUND, (due, start, *served, self.clock.now(),
                                                float(retry)), strict=True):
                self.turnaround[name].append(value)
        self.calls[OUTCOME_NAMES[outcome]] += 1
        return outcome, hint

    async def _http_call(self, job: WireJob) -> tuple[int, float | None, tuple[float, float]]:
        """One call for *job* (its id and attempt in ``X-Job``: the server draws that
        attempt's service time, as the comparison's simulation does)."""
        served = (NOT_SERVED, NOT_SERVED)
        try:
            async with self.session.post(self.url, headers={
                    JOB_HEADER: f"{job.id} {job.attempts}"}) as response:
                await response.read()
                status = response.status
                hint = response.headers.get("Retry-After")
                times = response.headers.get(TIMES_HEADER)
                if times is not None:
                    arrived, left = times.split()
                    served = (float(arrived), float(left))
        except asyncio.TimeoutError:
            self.log["timeouts"].append(self.clock.now())
            return TIMEOUT, None, served
        except aiohttp.ClientError:
            return DOWN, None, served
        if status == 503:
            outcome = REJECTED if response.headers.get("X-Outcome") == "rejected" else DOWN
        else:
            outcome = OUTCOMES.get(status, ERROR)
        if outcome == TIMEOUT:
            self.log["timeouts"].append(self.clock.now())
        return outcome, float(hint) if hint is not None else None, served

    async def _run_job(self, job: WireJob, breaker, budget, end: float) -> bool:
        """Take *job* to its end, its retry parked, or the run's end; False when it is
        still in hand at the run's end (pending)."""
        sc = self.scenario
        clock = self.clock
        sleep_mode = sc.workers.retry_mode == "sleep"
        retries_only = sc.breaker.retries_only
        slow_threshold = sc.breaker.slow_call_threshold
        late = self.lateness.samples["timer"]
        due = clock.now()  # dequeued: the attempt is due now
        while True:
            now = clock.now()
            if now >= end:
                return False
            if budget is not None and budget.gates_calls \
                    and not await budget.allow_call(now, not job.retries):
                self.log["budget_refused"].append(now)
                return await self._give_up(job, now)
            if breaker is not None and (not retries_only or job.attempts) \
                    and not await breaker.permit(now):
                self.log["short_circuited"].append(now)
                if retries_only:
                    return await self._give_up(job, now)
                if sleep_mode:
                    await self._wait_breaker(breaker)
                    due = clock.now()  # let through: the attempt is due now
                    continue
                await self.redis.zadd(DELAYED, {job.encode(): max(breaker.open_until, now)})
                return True
            job.attempts += 1
            started = now
            outcome, hint = await self._call(job, due, bool(job.retries))
            now = clock.now()
            if now >= end:
                return False
            failed = outcome != OK or job.poison
            if breaker is not None:
                await breaker.record(now, failed, slow_threshold is not None
                                     and now - started >= slow_threshold)
            if budget is not None:
                await budget.on_result(now, not failed, job.paid)
                job.paid = 0.0
            if not failed:
                self._finish(job, now, SUCCEEDED)
                return True
            if self.rules.gives_up(job, outcome):
                return await self._give_up(job, now)
            answered = None  # the budget's answer, asked here (it may be shared in Redis)
            if budget is not None:
                answered = Answered(await budget.allow_retry(
                    now, outcome == TIMEOUT, outcome in self.rules.throttling))
            self.last.retry_after = hint
            pause = self.retry(job, now, outcome, answered)
            if pause is None:  # the budget refused the retry
                return await self._give_up(job, now)
            if not sleep_mode:
                await self.redis.zadd(DELAYED, {job.encode(): now + pause})
                return True
            self.sleeping += 1
            due = min(now + pause, end)
            try:
                await clock.sleep_until(due, late)
            finally:
                self.sleeping -= 1

    def _record_sleep(self, now: float, job: int, attempt: int, sleep: float) -> None:
        for name, value in zip(("time", "job", "attempt", "sleep"), (now, job, attempt, sleep),
                               strict=True):
            self.sleeps[name].append(value)

    def _budget_refused(self, now: float) -> None:
        self.log["budget_refused"].append(now)

    def _finish(self, job: WireJob, now: float, outcome: int) -> None:
        for name, value in zip(("id", "time", "attempts", "outcome"),
                               (job.id, now, job.attempts, outcome), strict=True):
            self.finished[name].append(value)

    async def _give_up(self, job: WireJob, now: float) -> bool:
        """The job fails for good: to the DLQ, or (DLQ off) back on the queue after the
        redelivery delay."""
        if self.scenario.dlq.enabled:
            self._finish(job, now, DEAD_LETTERED)
            await self.redis.rpush(DLQ, job.encode())
            return True
        self.log["recycled"].append(now)
        job.retries, job.prev = 0, self.scenario.retry.base
        await self.redis.zadd(DELAYED, {job.encode(): now + self.scenario.dlq.redelivery_delay})
        return True

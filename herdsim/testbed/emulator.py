"""The scenario's downstream in wall-clock time: the model's rules on an asyncio loop.

``await Emulator.call()`` is one call; it returns an outcome (``OK``, ``ERROR``,
``DOWN``, ``REJECTED``, ``THROTTLED``, ``TIMEOUT``) and the Retry-After hint, following
:mod:`herdsim.model.downstream.core`: slots and a waiting room, service times drawn from the
scenario's distribution and stream, the client deadline (a call waiting past it leaves
the room; one served past it is served anyway, as waste), outages at their times from
``t0`` (``down`` fails every call in flight at once, ``blackhole`` answers nothing before
the deadline, ``error``, ``slow``), the crash rule (the model's own
:class:`~herdsim.model.downstream.collapse.CollapseGuard`) and the rate limiter (the policies' own
:class:`~herdsim.policies.rate_limit.TokenBucket`). Each call is one future; a timer per
call sets it.

What happened is logged as event times (seconds since ``t0``) in flat arrays, as the
model's recorder logs them.
"""

from __future__ import annotations

import asyncio
from array import array
from collections import deque
from collections.abc import Callable

from herdsim.config.scenario import Scenario
from herdsim.config.sections import Downstream
from herdsim.model import job_streams
from herdsim.model.calls import DOWN, ERROR, OK, REJECTED, THROTTLED, TIMEOUT
from herdsim.model.downstream.collapse import CollapseGuard
from herdsim.model.streams import draws, generators
from herdsim.policies.outages import OutageState
from herdsim.policies.rate_limit import TokenBucket
from herdsim.testbed.timing import Clock, Lateness

FAILED_TOGETHER = -1  # a call in flight when the downstream went down (answered DOWN)
EVENTS = ("attempts", "rejected", "errors", "wasted", "crashes")
OUTCOME_NAMES = {OK: "ok", ERROR: "error", DOWN: "down", REJECTED: "rejected",
                 THROTTLED: "throttled", TIMEOUT: "timeout"}


def service_draws(scenario: Scenario):
    """The service-time draws of the simulation's ``service`` stream."""
    return draws(scenario.downstream.service.sampler(generators(scenario.seed)["service"]))


class Emulator:
    """The downstream of *scenario*; call :meth:`start` once the run's ``t0`` is known."""

    def __init__(self, scenario: Scenario, clock: Clock, lateness: Lateness | None = None,
                 per_job: bool = False):
        cfg: Downstream = scenario.downstream
        self.cfg = cfg
        self.queue = scenario.queue or scenario.name  # the metrics' queue label
        self.clock = clock
        self.lateness = lateness or Lateness()
        self._late = self.lateness.samples["timer"]
        # the service time of a call: the next of the service stream, or (*per_job*, the
        # testbed's) the one of its job and attempt (job_streams.service_time)
        self._service: Callable[[tuple[int, int] | None], float]
        self.per_job = per_job
        if per_job:
            seed, service = scenario.seed, cfg.service

            def per_key(key: tuple[int, int] | None) -> float:
                assert key is not None  # the server refuses a call without one (400)
                return job_streams.service_time(seed, service, *key)

            self._service = per_key
        else:
            draw = service_draws(scenario)
            self._service = lambda _key: draw()
        outage_rng = generators(scenario.seed)["outages"]
        self._outage_draw = draws(lambda n: outage_rng.random(n))
        collapse = cfg.overload.collapse
        self._guard = CollapseGuard(collapse) if collapse is not None else None
        self._restart = collapse.restart_time if collapse is not None else 0.0
        self._limiter = (TokenBucket(cfg.rate_limit.rate, cfg.rate_limit.burst)
                         if cfg.rate_limit else None)
        hint = cfg.retry_after
        limiter = self._limiter
        self._hint: Callable[[float], float] | None
        if hint is None:
            self._hint = None
        elif hint == "limiter":
            assert limiter is not None  # validated: a limiter's hint needs the limiter
            self._hint = limiter.wait
        else:
            self._hint = lambda now: hint
        self.busy = 0
        self.waiting: deque[asyncio.Future] = deque()
        self.active: set[asyncio.Future] = set()  # every call in service or waiting
        self.outages = OutageState()  # what the outages holding do (their members' rule)
        self.crashed = 0  # one while crashed
        self.failures = 0  # how many times every call in flight failed together
        self.log = {name: array("d") for name in EVENTS}
        self.outcomes = dict.fromkeys(OUTCOME_NAMES.values(), 0)

    # -- health ---------------------------------------------------------------------------

    def start(self) -> None:
        """Arm every outage at its time from ``t0``."""
        loop = asyncio.get_running_loop()
        for outage in self.cfg.outages:
            loop.call_at(self.clock.t0 + outage.start, self._begin, outage)
            loop.call_at(self.clock.t0 + outage.end, self._end, outage)

    def _timer_late(self, due: float) -> None:
        self._late.append(max(0.0, self.clock.now() - due))

    def _begin(self, outage) -> None:
        self._timer_late(outage.start)
        outage.begin(self.outages)
        self.outages.refresh()
        if outage.refuses:
            self._fail_in_flight()

    def _end(self, outage) -> None:
        self._timer_late(outage.end)
        outage.cease(self.outages)
        self.outages.refresh()

    @property
    def up(self) -> bool:
        return not (self.outages.down or self.crashed)

    def _crash(self, now: float) -> None:
        self.log["crashes"].append(now)
        self.crashed += 1
        self._fail_in_flight()
        due = now + self._restart
        asyncio.get_running_loop().call_at(self.clock.t0 + due, self._restarted, due)

    def _restarted(self, due: float) -> None:
        self._timer_late(due)
        self.crashed -= 1

    def _fail_in_flight(self) -> None:
        """Every call in service or waiting fails now, together (the herd's t0)."""
        self.failures += 1  # a slot handed to a waiter that has not yet woken is void
        active, self.active = self.active, set()
        for future in active:
            if not future.done():
                future.set_result(FAILED_TOGETHER)
        self.waiting.clear()
        self.busy = 0
        if self._guard is not None:
            self._guard.clear()

    # -- a call ---------------------------------------------------------------------------

    async def call(self, key: tuple[int, int] | None = None) -> tuple[int, float | None]:
        """One call, start to answer: ``(outcome, retry_after or None)``; *key* is its
        ``(job id, attempt)`` (needed by an emulator built *per_job*)."""
        outcome, hint = await self._call(key)
        self.outcomes[OUTCOME_NAMES[outcome]] += 1
        return outcome, hint

    async def _call(self, key) -> tuple[int, float | None]:
        now = self.clock.now()
        self.log["attempts"].append(now)
        timeout = self.cfg.timeout
        if not self.up:
            self.log["rejected"].append(now)
            return DOWN, None
        if self.outages.blackhole:
            if timeout is None:  # hangs until the client gives up (or the run ends)
                await asyncio.Event().wait()
            else:
                await self.clock.sleep_until(now + timeout)
            return TIMEOUT, None
        if self._limiter is not None and not self._limiter.take(now):
            return self._refuse(now, THROTTLED)
        if self._guard is not None and self._guard.overloaded(now, self.busy + len(self.waiting)):
            self._crash(now)
            self.log["rejected"].append(now)
            return DOWN, None
        deadline = now + timeout if timeout is not None else None
        loop = asyncio.get_running_loop()
        if self.busy >= self.cfg.concurrency:
            limit = self.cfg.queue_limit
            if limit is not None and len(self.waiting) >= limit:
                return self._refuse(now, REJECTED)
            turn = loop.create_future()
            self.waiting.append(turn)
            self.active.add(turn)
            failures = self.failures
            left = deadline - now if deadline is not None else None
            try:
                granted = await asyncio.wait_for(asyncio.shield(turn), left)
            except asyncio.TimeoutError:  # the client's deadline came while it waited
                if turn in self.waiting:
                    self.waiting.remove(turn)
                self.active.discard(turn)
                if turn.done() and turn.result() == OK and failures == self.failures:
                    self._free_slot()  # handed a slot as it left: the next one takes it
                turn.cancel()
                return TIMEOUT, None
            if granted == FAILED_TOGETHER or failures != self.failures:
                return DOWN, None  # failed together (maybe after its slot was handed over)
            now = self.clock.now()
        else:
            self.busy += 1
        return await self._serve(now, deadline, loop, key)

    async def _serve(self, now: float, deadline: float | None, loop, key
                     ) -> tuple[int, None]:
        """Service in a slot (counted in ``busy``) from *now*, then the answer."""
        s = self._service(key) * self.outages.slow
        per_call = self.cfg.overload.latency_per_call
        if per_call:
            s += per_call * self.busy
        done = loop.create_future()
        self.active.add(done)
        end = now + s
        loop.call_at(self.clock.t0 + end, self._served, done, end)
        value = await done
        if value == FAILED_TOGETHER:
            return DOWN, None
        if deadline is not None and end > deadline:  # the client left at its deadline
            self.log["wasted"].append(self.clock.now())
            return TIMEOUT, None
        failing = self.outages.error_rate
        if failing and self._outage_draw() < failing:
            self.log["errors"].append(self.clock.now())
            return ERROR, None
        return OK, None

    def _served(self, done: asyncio.Future, end: float) -> None:
        if done.done():  # failed together since
            return
        self._timer_late(end)
        self.active.discard(done)
        done.set_result(OK)
        self._free_slot()

    def _free_slot(self) -> None:
        """A slot's work is done: the waiting room's head takes it, or it is free."""
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                self.active.discard(turn)
                turn.set_result(OK)
                return
        self.busy -= 1

    def _refuse(self, now: float, outcome: int) -> tuple[int, float | None]:
        self.log["rejected"].append(now)
        return outcome, (self._hint(now) if self._hint is not None else None)



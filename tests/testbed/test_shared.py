"""The pool's breaker and budget shared through a real ``redis-server``
(:mod:`herdsim.testbed.shared`) make the decisions the policies' own objects make.

One random sequence of events (fixed seed; times increasing by random gaps, failure
rates that swing between calm and storm so the breaker trips, probes, reopens and closes
and the budgets run dry and refill) is fed to a pure object and to its Redis twin; every
answer, and the state after every event, must be identical (the same doubles, not
approximately). Then two clients on one key, as two worker processes hold it, see one
state, and the shared clock never goes backwards.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
import redis.asyncio as aioredis
from pydantic import TypeAdapter

from herdsim.policies import budgets
from herdsim.policies.breaker import OPEN, CircuitBreaker
from herdsim.policies.breaker import Resilience4j as Breaker
from herdsim.testbed.processes import Fleet
from herdsim.testbed.shared import PROBE_POLL, LocalBreaker, SharedBreaker, SharedBudget, peek

EVENTS = 800
pytestmark = pytest.mark.requires("redis-server")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    fleet = Fleet(tmp_path_factory.mktemp("redis"))
    try:
        yield fleet.start_redis()
    finally:
        fleet.stop()


def _run(url: str, body):
    async def main():
        client = aioredis.Redis.from_url(url)
        try:
            await client.flushdb()
            return await body(client)
        finally:
            await client.aclose()
    return asyncio.run(main())


def _times(rng: np.random.Generator) -> np.ndarray:
    """Event times: gaps of 50 ms on average, one in fifty a pause of 2 to 8 s (every
    bucket of a window goes stale)."""
    gaps = rng.exponential(0.05, EVENTS)
    pauses = rng.random(EVENTS) < 0.02
    gaps[pauses] = rng.uniform(2.0, 8.0, int(pauses.sum()))
    return np.cumsum(gaps)


def _failing(t: float) -> float:
    """The chance a call fails at time *t*: storms of 4 s every 15 s."""
    return 0.9 if (t % 15.0) < 4.0 else 0.05


BREAKERS = {
    "time window": {"enabled": True, "window": "5s", "minimum_calls": 10,
                    "open_duration": "1s", "half_open_calls": 3,
                    "open_duration_multiplier": 1.5, "max_open_duration": "3s"},
    "count window, slow calls": {"enabled": True, "window_calls": 20, "minimum_calls": 10,
                                 "failure_rate_threshold": 0.5, "slow_call_threshold": "1s",
                                 "slow_call_rate_threshold": 0.3, "open_duration": "700ms",
                                 "half_open_calls": 2},
}


@pytest.mark.parametrize("name", list(BREAKERS))
def test_the_shared_breaker_decides_as_the_pure_one(redis_url, name):
    cfg = Breaker(**BREAKERS[name])
    rng = np.random.default_rng(7)
    times = _times(rng)
    ops = rng.choice(["blocked", "permit", "record"], EVENTS, p=[0.2, 0.4, 0.4])
    failed = rng.random(EVENTS)
    slow = rng.random(EVENTS) < 0.2

    async def body(client):
        pure = CircuitBreaker(cfg)
        shared = SharedBreaker(client, CircuitBreaker(cfg))
        await shared.init()
        seen = set()
        for i, (t, op) in enumerate(zip(times.tolist(), ops, strict=True)):
            if op == "blocked":
                a, b = pure.blocked(t), await shared.blocked(t)
            elif op == "permit":
                a, b = pure.permit(t), await shared.permit(t)
            else:
                fail = bool(failed[i] < _failing(t))
                pure.record(t, fail, bool(slow[i]))
                await shared.record(t, fail, bool(slow[i]))
                a = b = None
            assert a == b, (i, t, op)
            assert (shared.state, shared.open_until) == (pure.state, pure.open_until), (i, t)
            assert await peek(shared, "trips", "consecutive", "probes_left") == [
                pure.trips, pure._consecutive_trips, pure._probes_left,
                *pure.window.totals], (i, t)
            seen.add(pure.state)
        assert await shared.trips() == pure.trips  # what the real run logs as breaker_trips
        assert await LocalBreaker(pure).trips() == pure.trips
        return seen, pure.trips

    seen, trips = _run(redis_url, body)
    assert seen == {"closed", "open", "half_open"} and trips >= 3  # every path was walked


BUDGETS = {
    "aws token bucket": {"kind": "token_bucket", "preset": "aws", "capacity": 60},
    "grpc token bucket": {"kind": "token_bucket", "preset": "grpc"},
    "first-try credit": {"kind": "token_bucket", "capacity": 5, "retry_cost": 1,
                         "timeout_cost": 2, "failure_cost": 0, "success_refund": 0.1,
                         "refund_retry_cost": False, "floor": 0, "strict": True,
                         "credit_on": "first_try"},
    "adaptive throttle": {"kind": "adaptive", "window": "4s", "k": 1.5},
    "ratio": {"kind": "ratio", "window": "3s", "ratio": 0.2, "min_per_second": 1},
    "cumulative ratio": {"kind": "cumulative_ratio", "ratio": 0.3},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUDGETS))
def test_the_shared_budget_decides_as_the_pure_one(redis_url, name):
    """Each event is a job's step: a call (first try or retry; the adaptive throttle's
    uniform draw comes with it), its result, and a retry asked for after a failure
    (timed out or throttled at random). The pure object gets the event's draw too."""
    cfg = TypeAdapter(budgets.Budget).validate_python(BUDGETS[name])
    rng = np.random.default_rng(11)
    times = _times(rng)
    draws, fails, first, kinds = (rng.random(EVENTS), rng.random(EVENTS),
                                  rng.random(EVENTS) < 0.5, rng.integers(0, 3, EVENTS))
    current = {"draw": 0.0}

    async def body(client):
        pure = cfg.build(lambda: current["draw"])
        shared = SharedBudget(client, cfg.build(lambda: 0.0),
                              lambda: current["draw"])
        await shared.init()
        answers = []
        paid = 0.0
        fields = [f for f in ("tokens", "first_tries", "failures") if hasattr(pure, f)]
        for i, t in enumerate(times.tolist()):
            current["draw"] = float(draws[i])
            if pure.gates_calls:
                a = pure.allow_call(t, bool(first[i]))
                assert a == await shared.allow_call(t, bool(first[i])), i
                answers.append(a)
                if not a:
                    continue
            ok = bool(fails[i] >= _failing(t))
            job_paid = 0.0 if first[i] else paid
            pure.on_result(t, ok, job_paid)
            await shared.on_result(t, ok, job_paid)
            if not ok:
                timed_out, throttled = kinds[i] == 1, kinds[i] == 2
                a = pure.allow_retry(t, timed_out, throttled)
                assert a == await shared.allow_retry(t, timed_out, throttled), i
                answers.append(a[0])
                paid = a[1]
            assert await peek(shared, *fields) == [getattr(pure, f) for f in fields] + (
                list(pure.window.totals) if hasattr(pure, "window") else []), i
        return answers, getattr(pure, "tokens", None)

    answers, _ = _run(redis_url, body)
    assert True in answers and False in answers  # both decisions were made and matched


def test_two_processes_share_one_breaker_and_its_clock_never_goes_back(redis_url):
    """A trip recorded through one client blocks the other; an event stamped before the
    last one seen counts at the last one's time."""
    cfg = Breaker(enabled=True, window_calls=4, minimum_calls=4, open_duration="1s")

    async def body(client):
        other = aioredis.Redis.from_url(redis_url)
        try:
            a, b = SharedBreaker(client, CircuitBreaker(cfg)), SharedBreaker(
                other, CircuitBreaker(cfg))
            for breaker in (a, b):
                await breaker.init()  # the second finds it made
            for k in range(4):
                await (a if k % 2 else b).record(10.0 + k * 0.001, True)
            blocked = await b.blocked(10.5)
            state, until = b.state, b.open_until
            await a.record(5.0, True)  # stamped in the past: counts at 10.003
            late = await a.permit(10.0)  # before open_until 11.003: still refused
            return blocked, state, until, late
        finally:
            await other.aclose()

    blocked, state, until, late = _run(redis_url, body)
    assert blocked and state == OPEN and until == 10.003 + 1.0 and not late


LAG = 1.0  # s: what a loaded 2-core machine may add to an asyncio wake-up


def test_the_workers_a_shared_breaker_holds_are_released_together_when_it_lets_go(redis_url):
    """Open for 0.3 s: two waiting workers are released together at its end, not before.
    Half-open with its one probe out: a waiter is held until the probe's success closes
    it (through another client, as another process), then released by the look-out
    (every ``PROBE_POLL``; the bounds leave a loaded machine's event loop 1 s of lag, and
    the two released together 50 ms between their resumptions: a poll per waiter, or a
    look-out that sleeps past the end, still fails them)."""
    cfg = Breaker(enabled=True, window_calls=2, minimum_calls=2, open_duration="300ms",
                  half_open_calls=1)

    async def body(client):
        other = aioredis.Redis.from_url(redis_url)
        start = time.monotonic()

        def now() -> float:
            return time.monotonic() - start

        try:
            mine, theirs = (SharedBreaker(client, CircuitBreaker(cfg)),
                            SharedBreaker(other, CircuitBreaker(cfg)))
            await mine.init()
            await mine.record(now(), True)
            await mine.record(now(), True)  # opens until now + 0.3
            until = mine.open_until

            async def wait() -> float:
                await mine.wait_unblocked(now)
                return now()

            released = await asyncio.gather(wait(), wait())
            assert await theirs.permit(now())  # the one probe: half-open, none left
            waiter = asyncio.create_task(wait())
            await asyncio.sleep(0.1)
            held = not waiter.done()
            closed_at = now()
            await theirs.record(closed_at, False)  # the probe succeeded: closed
            freed = await waiter
            await mine.stop_waiting()
            return until, released, held, closed_at, freed
        finally:
            await other.aclose()

    until, released, held, closed_at, freed = _run(redis_url, body)
    assert all(until <= t < until + LAG for t in released), (until, released)
    assert abs(released[0] - released[1]) < 0.05, released  # one look-out frees both
    assert held and closed_at <= freed < closed_at + PROBE_POLL + LAG, (closed_at, freed)

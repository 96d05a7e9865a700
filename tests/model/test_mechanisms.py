"""Mechanisms the reproductions of the originals need, each off by default.

The event logs drive the downstream directly with scripted call times and constant
draws (as tests/model/downstream/test_service.py does) and compare every time with the rule worked
out from the fields: send + request leg + service + response leg, and so on.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import simpy
from conftest import assert_every_job_ends_in_one_place, play_calls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from small_scenarios import scenarios

import herdsim
from herdsim.config.sections import Downstream as DownstreamConfig
from herdsim.model.downstream.core import DOWN, OK, REJECTED, TIMEOUT, Downstream
from herdsim.model.kernel import Environment
from herdsim.model.recorder import Recorder
from herdsim.model.simulation import Simulation
from herdsim.model.streams import Draws, draws
from herdsim.policies import budgets
from herdsim.policies.backoff import Strategy
from herdsim.policies.rate_limit import TokenBucket

SERVICE, REQUEST, RESPONSE = 1.0, 0.3, 0.2
LEGS = {"service": {"distribution": "constant", "mean": SERVICE},
        "request_delay": {"distribution": "constant", "mean": REQUEST},
        "network_delay": {"distribution": "constant", "mean": RESPONSE}}


def constant(value: float) -> Draws:
    return draws(lambda n: np.full(n, value))


def play(starts: dict[str, float], until: float = 20.0, **fields):
    """Make one call per name at its send time; ``{name: (time heard, outcome)}``."""
    cfg = DownstreamConfig.model_validate({**LEGS, **fields})
    env = Environment()
    recorder = Recorder()
    legs = [constant(leg.mean) if leg else None for leg in (cfg.network_delay,
                                                            cfg.request_delay)]
    downstream = Downstream(env, cfg, constant(cfg.service.mean), constant(1.0), recorder,
                            *legs)
    return play_calls(env, downstream, starts, until, cfg.timeout), recorder, downstream


def rounded(values) -> list[float]:
    return [round(v, 9) for v in values]


# -- a. the request leg -------------------------------------------------------------------

def test_a_call_crosses_both_legs():
    """Heard at send + request + service + response; the server sees it (attempts) and
    holds the slot from send + request for one service."""
    log, rec, _ = play({"A": 0.0})
    assert log == {"A": (round(REQUEST + SERVICE + RESPONSE, 9), OK)}
    assert rounded(rec.attempts) == [REQUEST]


def test_admission_and_outages_are_decided_at_arrival():
    """Outage [0.1, 0.5): A, sent at 0, is on the wire at 0.1 (not failed in flight) and
    arrives at 0.3: DOWN, heard a response leg later. B, sent at 0.25, arrives at 0.55,
    after the outage: served."""
    log, rec, _ = play({"A": 0.0, "B": 0.25}, outages=[{"start": 0.1, "duration": 0.4}])
    assert log == {"A": (round(REQUEST + RESPONSE, 9), DOWN),
                   "B": (round(0.25 + REQUEST + SERVICE + RESPONSE, 9), OK)}
    assert rounded(rec.rejected) == [REQUEST]


def test_concurrency_is_counted_at_arrival():
    """One slot, a waiting room of 1: A holds the slot [0.3, 1.3); B (sent 0.1) waits
    from 0.4 and starts at 1.3; C (sent 0.2, arriving 0.5) finds the room full: REJECTED,
    heard at 0.5 + response."""
    log, _, _ = play({"A": 0.0, "B": 0.1, "C": 0.2}, concurrency=1, queue_limit=1)
    a_done = REQUEST + SERVICE
    assert log == {"A": (round(a_done + RESPONSE, 9), OK),
                   "B": (round(a_done + SERVICE + RESPONSE, 9), OK),
                   "C": (round(0.2 + REQUEST + RESPONSE, 9), REJECTED)}


def test_the_timeout_counts_both_legs_from_the_send():
    """Timeout just below the round trip: the client gives up at send + timeout, the
    server finishes anyway (wasted at send + request + service)."""
    timeout = REQUEST + SERVICE + RESPONSE - 0.05
    log, rec, ds = play({"A": 0.0}, timeout=timeout)
    assert log == {"A": (round(timeout, 9), TIMEOUT)}
    assert rounded(rec.wasted) == [round(REQUEST + SERVICE, 9)]
    assert ds.busy == 0 and not ds.active


@pytest.mark.parametrize("legs", [True, False])
@pytest.mark.parametrize("section, caller", [(100.0, 0.5), (0.5, None)])
def test_the_timeout_is_the_caller_s_not_the_downstream_s(legs, section, caller):
    """The downstream section's ``timeout`` is the workers' setting, not the downstream's:
    a call carries its caller's. A caller giving up after 0.5 s hears TIMEOUT at send +
    0.5 whatever the section says; a caller without a timeout waits for the answer (send
    + the legs + service) even when the section has one."""
    fields = {} if legs else {"request_delay": None, "network_delay": None}
    cfg = DownstreamConfig.model_validate({**LEGS, **fields, "timeout": section})
    env, recorder = Environment(), Recorder()
    wires = [constant(leg.mean) if leg else None for leg in (cfg.network_delay,
                                                             cfg.request_delay)]
    downstream = Downstream(env, cfg, constant(SERVICE), constant(1.0), recorder, *wires)
    log = play_calls(env, downstream, {"A": 0.0}, 20.0, caller)
    answered = SERVICE + (REQUEST + RESPONSE if legs else 0.0)
    assert log == ({"A": (0.5, TIMEOUT)} if caller is not None
                   else {"A": (round(answered, 9), OK)})


def test_a_request_slower_than_the_timeout_still_loads_the_server():
    """Timeout 0.2 < request leg 0.3: the client times out at 0.2; the call reaches the
    server at 0.3 (an attempt) and is served for nobody (wasted at 1.3)."""
    log, rec, ds = play({"A": 0.0}, timeout=0.2)
    assert log == {"A": (0.2, TIMEOUT)}
    assert rounded(rec.attempts) == [REQUEST]
    assert rounded(rec.wasted) == [round(REQUEST + SERVICE, 9)]
    assert ds.busy == 0 and not ds.active


def test_a_fast_failure_arriving_after_the_deadline_is_a_timeout():
    """No waiting room, one slot: B (sent 0.1) is rejected at 0.4; its answer would
    arrive at 0.6, after its deadline (0.1 + 0.45): the client times out at 0.55."""
    log, _, _ = play({"A": 0.0, "B": 0.1}, concurrency=1, queue_limit=0, timeout=1.55)
    assert log["B"] == (round(0.1 + REQUEST + RESPONSE, 9), REJECTED)
    log, _, _ = play({"A": 0.0, "B": 0.1}, concurrency=1, queue_limit=0, timeout=0.45)
    assert log["B"] == (round(0.1 + 0.45, 9), TIMEOUT)


def test_a_waiting_call_abandoned_at_its_deadline_leaves_the_count():
    """One slot, timeout 0.35: A holds the slot [0.3, 1.3); B, sent at 0.05, arrives at
    0.35 and waits; its client leaves at 0.4; at 1.3 B is dropped (serve_abandoned off)."""
    log, _, ds = play({"A": 0.0, "B": 0.05}, concurrency=1, timeout=0.35)
    assert log["B"] == (0.4, TIMEOUT)
    assert ds.n_waiting == 0 and ds.busy == 0


def test_requests_abandoned_on_the_wire_load_the_server_uncounted():
    """Timeout 0.2 < request leg: both clients leave while their calls are on the wire.
    A takes the one slot at 0.3; B, arriving at 0.35, waits but is not counted as
    waiting; with serve_abandoned both are served for nobody, back to back."""
    _, _, ds = play({"A": 0.0, "B": 0.05}, until=0.5, concurrency=1, timeout=0.2,
                    serve_abandoned=True)
    assert (ds.busy, ds.n_waiting, ds.active) == (1, 0, {})
    _, rec, _ = play({"A": 0.0, "B": 0.05}, concurrency=1, timeout=0.2,
                     serve_abandoned=True)
    assert rounded(rec.wasted) == [REQUEST + SERVICE, REQUEST + 2 * SERVICE]


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=scenarios(), request=st.floats(0.001, 0.3),
       model=st.sampled_from(["at_start", "continuous"]))
def test_with_a_request_leg_every_job_ends_in_one_place(data, request, model):
    """test_conservation's scenarios with a request leg, under both latency models:
    slots and the waiting room never go negative nor past their limits, and every job
    is counted once."""
    data["downstream"]["request_delay"] = {"distribution": "exponential", "mean": request}
    data["downstream"]["overload"]["latency_model"] = model
    sc = herdsim.load_scenario(data)
    sim = Simulation(sc)
    env, ds = sim.env, sim.downstream
    while env.peek() < sc.duration:
        env.step()
        assert 0 <= ds.busy <= sc.downstream.concurrency
        assert ds.n_waiting <= (sc.downstream.queue_limit or math.inf)
        assert ds.n_waiting >= 0
    assert_every_job_ends_in_one_place(sim, sim.run())


def test_the_kernel_environment_keeps_simpy_time():
    """kernel.Environment's ``now`` is SimPy's own clock."""
    env = Environment()

    def wait():
        yield env.timeout(2.5)

    env.process(wait())
    env.run()
    assert env.now == simpy.Environment.now.fget(env) == 2.5


# -- b. open-loop callers grouped into clients -------------------------------------------

def always_down(make_scenario, **changes):
    """Open loop against a downstream down for the whole run: every call fails fast."""
    base = {"duration": "4s", "workload": {"rate": 100},
            "workers": {"count": None, "clients": 10},
            "downstream": {"outages": [{"start": 0, "duration": "4s"}]},
            "retry": {"strategy": "fixed", "base": "10ms", "max_retries": None}}
    for key, value in changes.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return herdsim.load_scenario(make_scenario(**base))


def test_per_client_budgets_pay_independently(make_scenario):
    """A bucket of C tokens, a retry costs 1, nothing refills, every call fails: one
    pool bucket pays C retries in all; one bucket per client pays C per client (every
    client receives jobs: P(a client of 10 gets none of ~400 arrivals) < 1e-17)."""
    budget = {"kind": "token_bucket", "capacity": 7, "retry_cost": 1, "timeout_cost": 1,
              "failure_cost": 0, "success_refund": 0, "refund_retry_cost": False,
              "floor": 0, "strict": False}
    pool = herdsim.run(always_down(make_scenario, budget={**budget, "scope": "pool"}))
    per_client = herdsim.run(always_down(make_scenario, budget={**budget, "scope": "client"}))
    assert pool.summary["retries_total"] == 7
    assert per_client.summary["retries_total"] == 7 * 10


def test_per_client_breakers_trip_independently(make_scenario):
    """Every client's breaker sees only failures: each trips once (open longer than
    the run), so the trips add up to the number of clients; one pool breaker trips once."""
    breaker = {"enabled": True, "window_calls": 5, "minimum_calls": 5,
               "open_duration": "10s"}
    retry = {"max_retries": 5}
    pool = herdsim.run(always_down(make_scenario, retry=retry,
                                   breaker={**breaker, "scope": "pool"}))
    per_client = herdsim.run(always_down(make_scenario, retry=retry,
                                         breaker={**breaker, "scope": "client"}))
    assert pool.summary["breaker_trips"] == 1
    assert per_client.summary["breaker_trips"] == 10


def test_clients_without_client_scopes_change_nothing(make_scenario):
    """The client draw has its own stream: grouping callers whose budget and breaker are
    the pool's gives the same run, bit for bit."""
    def run(clients):
        return herdsim.run(herdsim.load_scenario(make_scenario(
            workers={"count": None, "clients": clients},
            downstream={"outages": [{"start": "0.5s", "duration": "0.5s"}]},
            breaker={"enabled": True, "scope": "pool", "minimum_calls": 5},
            budget={"kind": "ratio", "scope": "pool"})))
    grouped, alone = run(7), run(None)
    for frame in ("timeseries", "sleeps", "jobs"):
        assert getattr(grouped, frame).equals(getattr(alone, frame))


@pytest.mark.parametrize(("changes", "field"), [
    ({"workers": {"count": 10, "clients": 3}}, "workers.clients"),
    ({"workers": {"count": None}, "budget": {"kind": "ratio", "scope": "client"}},
     "budget.scope"),
    ({"workers": {"count": None}, "breaker": {"enabled": True, "scope": "client"}},
     "breaker.scope"),
    ({"budget": {"kind": "ratio", "scope": "client"}}, "budget.scope"),
])
def test_client_fields_are_refused_where_they_mean_nothing(make_scenario, changes, field):
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(make_scenario(**changes))
    assert [f for f, _ in info.value.problems] == [field]


# -- c. a token bucket credited per first try ----------------------------------------------

class OriginalBucket:
    """The rule of retry_sim/retry_strategy.py AdaptiveRetryStrategy, re-implemented:
    +fill on every first try (cap size); a retry needs more than 1 token and takes 1."""

    def __init__(self, fill: float, size: float):
        self.fill, self.size, self.bucket = fill, size, size

    def start(self) -> None:
        self.bucket = min(self.bucket + self.fill, self.size)

    def should_retry(self) -> bool:
        if self.bucket > 1.0:
            self.bucket -= 1.0
            return True
        return False


ORIGINAL_BUCKET = {"kind": "token_bucket", "capacity": 5, "success_refund": 0.1,
                   "credit_on": "first_try", "retry_cost": 1, "timeout_cost": 1,
                   "failure_cost": 0, "refund_retry_cost": False, "floor": 0, "strict": True}


@given(fill=st.floats(0.01, 2.0), size=st.floats(1.0, 20.0),
       script=st.lists(st.sampled_from(["first", "success", "failure", "timeout"]),
                       max_size=200))
def test_first_try_crediting_is_the_original_bucket(fill, size, script):
    """Driven as the worker drives it (allow_call before each first try, on_result after
    each call, allow_retry after each failure), the bucket decides every retry as the
    original does, and holds the same tokens."""
    ours = TypeAdapter(budgets.Budget).validate_python(
        {**ORIGINAL_BUCKET, "capacity": size, "success_refund": fill}).build(None)
    theirs = OriginalBucket(fill, size)
    for now, step in enumerate(script):
        if step == "first":
            ours.allow_call(float(now), True)
            theirs.start()
        elif step == "success":
            ours.on_result(float(now), True, 0.0)
        else:
            ours.on_result(float(now), False, 0.0)
            allowed, _ = ours.allow_retry(float(now), step == "timeout")
            assert allowed == theirs.should_retry()
        assert ours.tokens == theirs.bucket


def replay(sim) -> list[tuple[float, int, bool | None]]:
    """A run against a downstream that is always down, as time-ordered events: first
    tries (0, at each arrival), failed calls (1, every call fails at once) and retry
    decisions (2: allowed = a sleep was drawn, refused = budget_refused)."""
    rec = sim.recorder
    return sorted([(t, 0, None) for t in rec.arrivals] + [(t, 1, None) for t in rec.attempts]
                  + [(t, 2, True) for t in rec.sleep_time]
                  + [(t, 2, False) for t in rec.budget_refused])


def test_the_engine_credits_first_tries_as_the_original(make_scenario):
    """One pool bucket in a run where every call fails: replaying the run's first tries
    and retry decisions through the original rule gives the same decision every time."""
    sim = Simulation(always_down(make_scenario, budget=ORIGINAL_BUCKET))
    sim.run()
    theirs = OriginalBucket(0.1, 5.0)
    decided = []
    for _, kind, allowed in replay(sim):
        if kind == 0:
            theirs.start()
        elif kind == 2:
            decided.append(allowed)
            assert allowed == theirs.should_retry()
    assert True in decided and False in decided  # both branches were exercised


# -- d. the cumulative-ratio retry breaker ---------------------------------------------------

class OriginalBreaker:
    """The rule of retry_sim/retry_strategy.py CircuitBreakerRetryStrategy, re-implemented:
    calls += 1 per first try; on a failure, failures += 1, then retry only if
    failures / calls <= max_rate and the call's NRetries(N) allows it."""

    def __init__(self, max_rate: float):
        self.max_rate, self.calls, self.failures = max_rate, 0.0, 0.0

    def start(self) -> None:
        self.calls += 1.0

    def should_retry(self, tries_left: bool) -> bool:
        self.failures += 1.0
        return self.failures / self.calls <= self.max_rate and tries_left


@given(ratio=st.floats(0.01, 1.0), n_retries=st.integers(0, 4),
       script=st.lists(st.tuples(st.sampled_from(["first", "ok", "fail"]),
                                 st.integers(0, 50)), max_size=200))
def test_the_cumulative_ratio_is_the_original_breaker(ratio, n_retries, script):
    """Calls start, succeed and fail in any order, as the worker drives the budget:
    allow_call(first) at each first try; at each failure on_result, then give up when
    max_retries is spent, else ask allow_retry."""
    ours = TypeAdapter(budgets.Budget).validate_python(
        {"kind": "cumulative_ratio", "ratio": ratio}).build(None)
    theirs = OriginalBreaker(ratio)
    live: list[int] = []  # retries made so far by each call in flight
    for now, (step, pick) in enumerate(script):
        if step == "first":
            ours.allow_call(float(now), True)
            theirs.start()
            live.append(0)
            continue
        if not live:
            continue
        i = pick % len(live)
        if step == "ok":
            ours.on_result(float(now), True, 0.0)
            live.pop(i)
            continue
        ours.on_result(float(now), False, 0.0)
        tries_left = live[i] < n_retries
        allowed = tries_left and ours.allow_retry(float(now), False)[0]
        assert allowed == theirs.should_retry(tries_left)
        if allowed:
            live[i] += 1
        else:
            live.pop(i)


def test_the_engine_breaks_retries_as_the_original(make_scenario):
    """One pool scope, 30% of calls failing (an error outage all run long: the only
    failures, counted in ``errors``), three retries at most, ratio 0.35 (near the failure
    rate, so both answers occur): replaying first tries, failures and decisions through
    the original rule gives the same decision each time. Failures whose job had spent
    its retries have no decision, but are counted, as in the original."""
    sc = herdsim.load_scenario(make_scenario(
        duration="4s", workload={"rate": 100}, workers={"count": None, "clients": 10},
        downstream={"concurrency": 50, "outages": [
            {"start": 0, "duration": "4s", "mode": "error", "error_rate": 0.3}]},
        retry={"strategy": "fixed", "base": "10ms", "max_retries": 3},
        budget={"kind": "cumulative_ratio", "ratio": 0.35}))
    sim = Simulation(sc)
    sim.run()
    rec = sim.recorder
    events = sorted([(t, 0, None) for t in rec.arrivals] + [(t, 1, None) for t in rec.errors]
                    + [(t, 2, True) for t in rec.sleep_time]
                    + [(t, 2, False) for t in rec.budget_refused])
    theirs = OriginalBreaker(0.35)
    decided = []
    for _, kind, allowed in events:
        if kind == 0:
            theirs.start()
        elif kind == 1:
            theirs.failures += 1.0
        else:
            decided.append(allowed)
            assert allowed == (theirs.failures / theirs.calls <= theirs.max_rate)
    assert True in decided and False in decided


def test_callers_are_spread_uniformly_over_the_clients(make_scenario):
    """Per-client cumulative counters see each client's first tries: the counts are a
    multinomial sample with equal cells. Chi-square, 9 degrees of freedom; with this
    fixed seed a uniform assignment passes at p > 0.001 (a 1-in-1000 false alarm)."""
    sim = Simulation(always_down(make_scenario, duration="10s",
                                 budget={"kind": "cumulative_ratio", "scope": "client"}))
    sim.run()
    counts = [sim.budget_for(client).first_tries for client in range(10)]
    assert sum(counts) == len(sim.recorder.arrivals)
    assert scipy.stats.chisquare(counts).pvalue > 0.001


def test_a_cumulative_ratio_defaults_to_the_originals_tenth(make_scenario):
    sc = herdsim.load_scenario(make_scenario(budget={"kind": "cumulative_ratio"}))
    assert sc.budget.ratio == 0.1
    assert herdsim.load_scenario(make_scenario(budget={"kind": "ratio"})).budget.ratio == 0.2


# -- e. Retry-After -------------------------------------------------------------------------

def throttled(make_scenario, honour: str, strategy_sleep: str = "10ms", **downstream):
    """Every failure is a 429 (a 5/s limiter under 50 jobs/s, nothing else fails)."""
    return herdsim.run(herdsim.load_scenario(make_scenario(
        duration="3s", workload={"rate": 50}, workers={"count": 20},
        downstream={"rate_limit": {"rate": 5, "burst": 1}, "retry_after": "700ms",
                    **downstream},
        retry={"strategy": "fixed", "base": strategy_sleep, "cap": "5s", "max_retries": 3,
               "retry_after": honour})))


@pytest.mark.parametrize("legs", [{}, {"network_delay": {"mean": "5ms"}},
                                  {"network_delay": {"mean": "5ms"},
                                   "request_delay": {"mean": "5ms"}}])
@pytest.mark.parametrize(("honour", "strategy_sleep", "taken"), [
    ("ignore", "10ms", 0.01), ("use", "10ms", 0.7), ("use", "2s", 0.7),
    ("at_least", "10ms", 0.7), ("at_least", "2s", 2.0)])
def test_a_fixed_retry_after_sets_the_sleep_taken(make_scenario, legs, honour,
                                                  strategy_sleep, taken):
    """Every retry follows a 429 carrying Retry-After 700 ms (also across the network):
    ignore sleeps the strategy's value, use the server's, at_least the larger."""
    res = throttled(make_scenario, honour, strategy_sleep, **legs)
    assert len(res.sleeps) > 0
    assert np.allclose(res.sleeps["sleep"], taken, rtol=0, atol=1e-12)


def test_a_rejected_call_carries_the_retry_after(make_scenario):
    """One slot and no waiting room: every failure is a REJECTED carrying 300 ms."""
    res = herdsim.run(herdsim.load_scenario(make_scenario(
        downstream={"concurrency": 1, "queue_limit": 0, "retry_after": "300ms"},
        retry={"strategy": "fixed", "base": "10ms", "retry_after": "use"})))
    assert len(res.sleeps) > 0 and (res.sleeps["sleep"] == 0.3).all()


@given(rate=st.floats(0.1, 100.0), burst=st.floats(1.0, 5.0),
       gaps=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=30))
def test_the_limiter_wait_is_when_the_next_token_is_there(rate, burst, gaps):
    """After any history of takes, ``wait`` is the time until a whole token: a take
    at now + wait succeeds (exactly, in floating point), a take clearly before it fails."""
    now = 0.0
    bucket = TokenBucket(rate, burst)
    for gap in gaps:
        now += gap
        bucket.take(now)
    wait = bucket.wait(now)
    early, exact = TokenBucket(rate, burst), TokenBucket(rate, burst)
    for b in (early, exact):
        b.tokens, b.last = bucket.tokens, bucket.last
    assert exact.take(now + wait)
    if wait > 1e-6:
        assert not early.take(now + wait * 0.999)


def test_a_limiter_retry_after_brings_a_lone_client_back_when_a_token_is(make_scenario):
    """One worker and a 2/s limiter: after a 429 the worker sleeps exactly until the
    next token (use), and nobody else calls meanwhile, so every retry is admitted. Every
    recorded sleep ends where a call of the run is made: the sleep taken is recorded."""
    sim = Simulation(herdsim.load_scenario(make_scenario(
        duration="5s", workload={"rate": 20}, workers={"count": 1},
        downstream={"service": {"distribution": "constant", "mean": "1ms"},
                    "rate_limit": {"rate": 2, "burst": 1}, "retry_after": "limiter"},
        retry={"strategy": "fixed", "base": "10ms", "max_retries": None,
               "retry_after": "use"})))
    sim.run()
    rec = sim.recorder
    sleeps = list(zip(rec.sleep_time, rec.sleep_value, strict=True))
    assert len(sleeps) > 5
    retried = [t + v for t, v in sleeps if t + v < 5.0]
    assert set(retried) <= set(rec.attempts)
    assert not set(retried) & set(rec.rejected)


@pytest.mark.parametrize(("downstream", "field"), [
    ({"retry_after": "limiter"}, "downstream.retry_after"),
    ({"retry_after": "-1s"}, "downstream.retry_after"),
    ({"retry_after": "soon"}, "downstream.retry_after"),
])
def test_bad_retry_afters_are_refused(make_scenario, downstream, field):
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(make_scenario(downstream=downstream))
    assert [f for f, _ in info.value.problems] == [field]


# -- f. zero-wait policies and the attempt overhead -----------------------------------------

class ZeroWait(Strategy):
    """Retries at once, and says so."""

    min_sleep = 0.0

    def sleep(self, attempt, prev, rng):
        return 0.0


class SilentZeroWait(Strategy):
    """Retries at once without saying so: only the run-time guard can catch it."""

    def sleep(self, attempt, prev, rng):
        return 0.0


def zero_wait(make_scenario, strategy: str = "ZeroWait", **workers):
    """One worker with one job against a downstream down all run long."""
    return herdsim.load_scenario(make_scenario(
        duration="1s", workload={"arrivals": "constant", "rate": 0.5, "backlog": 1},
        workers={"count": 1, **workers},
        downstream={"outages": [{"start": 0, "duration": "1s"}]},
        retry={"strategy": f"{__name__}:{strategy}", "max_retries": None}))


def test_a_zero_wait_strategy_that_could_freeze_time_is_refused(make_scenario):
    with pytest.raises(herdsim.ScenarioError) as info:
        zero_wait(make_scenario)
    assert [f for f, _ in info.value.problems] == ["workers.attempt_overhead"]


def test_every_attempt_pays_the_overhead(make_scenario):
    """With overhead o the zero-wait worker calls at o, 2o, 3o, ... (SimPy's own sums)
    until the run ends: the run terminates and no attempt is free."""
    o = 0.003
    res = herdsim.run(zero_wait(make_scenario, attempt_overhead=o))
    expected, t = 0, o
    while t < 1.0:
        expected, t = expected + 1, t + o
    assert res.summary["attempts_total"] == expected


def test_the_run_time_guard_stops_a_silent_zero_wait_strategy(make_scenario):
    """A strategy that declares nothing passes validation; the run stops with the
    one-line error instead of hanging."""
    sc = zero_wait(make_scenario, "SilentZeroWait")
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.run(sc)
    assert [f for f, _ in info.value.problems] == ["workers.attempt_overhead"]


def test_the_overhead_is_part_of_the_latency(make_scenario):
    """Constant 100 ms service, no contention: every job takes overhead + service."""
    res = herdsim.run(herdsim.load_scenario(make_scenario(
        workload={"arrivals": "constant", "rate": 5}, workers={"attempt_overhead": "30ms"},
        downstream={"service": {"distribution": "constant", "mean": "100ms"}})))
    done = res.jobs.dropna(subset=["latency"])
    assert len(done) > 0 and np.allclose(done["latency"], 0.13)

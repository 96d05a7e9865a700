"""The circuit breaker as a pure object: state transitions under scripted call outcomes.

Each scripted test pins one rule of the Resilience4j/Polly semantics herdsim promises
(docs/mitigations.md). The Hypothesis tests drive the breaker with random outcome scripts
and check it against an independent reference model written from those rules (count
window) and against the invariants no script may break (time window, late results).
The engine tests then check what a breaker does to workers: no call while open, the
series and summary, closing again once the downstream is back.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.policies.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker
from herdsim.policies.breaker import Resilience4j as Breaker
from herdsim.results.result import Result


def breaker(**fields) -> CircuitBreaker:
    """A breaker from a validated ``breaker`` section (defaults: the brief's 0.4 / 30 s)."""
    return CircuitBreaker(Breaker(enabled=True, **fields))


def feed(b: CircuitBreaker, t: float, outcomes: str) -> None:
    """Make one permitted call per letter at time *t*: F failed, S success, W slow success."""
    for letter in outcomes:
        assert b.permit(t), f"call refused at t={t} in state {b.state}"
        b.record(t, failed=letter == "F", slow=letter == "W")


# -- closed -> open ------------------------------------------------------------------------


def test_no_trip_before_minimum_calls_even_if_all_fail():
    """Fewer than ``minimum_calls`` calls never trip it, whatever the failure rate."""
    b = breaker(minimum_calls=5, failure_rate_threshold=0.4)
    feed(b, 1.0, "FFFF")
    assert b.state == CLOSED
    feed(b, 1.0, "S")  # the fifth call: 4/5 = 0.8 >= 0.4
    assert b.state == OPEN and b.trips == 1


def test_trips_at_exactly_the_threshold_and_not_below():
    """Rate >= threshold trips (2/5 = 0.4); 1/5 stays closed; the check runs per call."""
    below = breaker(minimum_calls=5, failure_rate_threshold=0.4)
    feed(below, 1.0, "SSSFS")
    assert below.state == CLOSED
    at = breaker(minimum_calls=5, failure_rate_threshold=0.4)
    feed(at, 1.0, "SSSF")
    assert at.state == CLOSED  # 4 calls: below minimum_calls
    feed(at, 1.0, "F")
    assert at.state == OPEN


def test_time_window_forgets_results_older_than_the_window():
    """Window 10 s (buckets of 0.5 s): failures at t=0 count at t=9 and not at t=10.5."""
    kept = breaker(window=10.0, minimum_calls=5, failure_rate_threshold=0.5)
    feed(kept, 0.0, "FFFF")
    feed(kept, 9.0, "S")
    assert kept.state == OPEN
    forgotten = breaker(window=10.0, minimum_calls=5, failure_rate_threshold=0.5)
    feed(forgotten, 0.0, "FFFF")
    feed(forgotten, 10.5, "SSSSF")  # only these five are in the window: 1/5 < 0.5
    assert forgotten.state == CLOSED


def test_count_window_keeps_the_last_calls_only():
    """``window_calls: 4``: the oldest result leaves when a fifth arrives."""
    b = breaker(window_calls=4, minimum_calls=4, failure_rate_threshold=0.5)
    feed(b, 0.0, "FSSS")  # 1/4
    assert b.state == CLOSED
    feed(b, 100.0, "S")  # window S S S S: time plays no part
    feed(b, 100.0, "F")  # S S S F: 1/4
    assert b.state == CLOSED
    feed(b, 100.0, "F")  # S S F F: 2/4 = 0.5
    assert b.state == OPEN


def test_slow_calls_trip_it_even_when_they_succeed():
    """Slow-call rate >= ``slow_call_rate_threshold`` trips it; failures are not needed."""
    b = breaker(minimum_calls=4, slow_call_threshold=1.0, slow_call_rate_threshold=0.75)
    feed(b, 0.0, "WWSS")  # 2/4 slow
    assert b.state == CLOSED
    b2 = breaker(minimum_calls=4, slow_call_threshold=1.0, slow_call_rate_threshold=0.75)
    feed(b2, 0.0, "WWSW")  # 3/4 slow
    assert b2.state == OPEN


# -- open, half-open ------------------------------------------------------------------------


def tripped(**fields) -> CircuitBreaker:
    """A breaker just opened at t=0 by ``minimum_calls`` failures."""
    fields.setdefault("minimum_calls", 2)
    b = breaker(**fields)
    feed(b, 0.0, "F" * fields["minimum_calls"])
    assert b.state == OPEN
    return b


def test_open_refuses_until_open_until_then_half_opens():
    b = tripped(open_duration=10.0)
    assert b.open_until == 10.0
    for t in (0.0, 5.0, 9.999):
        assert b.blocked(t) and not b.permit(t)
    assert b.state == OPEN
    assert not b.blocked(10.0)
    assert b.permit(10.0)
    assert b.state == HALF_OPEN


def test_half_open_allows_exactly_half_open_calls_probes():
    b = tripped(open_duration=1.0, half_open_calls=3)
    assert [b.permit(2.0) for _ in range(5)] == [True, True, True, False, False]
    assert b.blocked(2.0)


def test_a_failed_probe_reopens_for_another_open_duration():
    b = tripped(open_duration=4.0, half_open_calls=3)
    assert b.permit(5.0)
    b.record(5.5, failed=True)
    assert b.state == OPEN and b.open_until == 9.5 and b.trips == 2


def test_a_slow_probe_reopens_it_too():
    b = tripped(open_duration=4.0, half_open_calls=2, slow_call_threshold=1.0)
    assert b.permit(5.0)
    b.record(6.5, failed=False, slow=True)
    assert b.state == OPEN


def test_half_open_calls_successful_probes_close_it_with_a_fresh_window():
    """All probes succeed: closed; the failures that tripped it are forgotten."""
    b = tripped(open_duration=1.0, half_open_calls=3, minimum_calls=3,
                failure_rate_threshold=0.5)
    assert all(b.permit(2.0) for _ in range(3))
    b.record(2.1, failed=False)
    b.record(2.2, failed=False)
    assert b.state == HALF_OPEN
    b.record(2.3, failed=False)
    assert b.state == CLOSED
    feed(b, 2.4, "FF")  # 2 calls < minimum_calls: the old failures did not survive
    assert b.state == CLOSED


def test_open_duration_grows_with_the_multiplier_up_to_the_maximum():
    """Consecutive trips: 2, 4, 8, 10, 10 s (x2, capped at 10); closing resets it to 2."""
    b = tripped(open_duration=2.0, open_duration_multiplier=2.0, max_open_duration=10.0,
                half_open_calls=1)
    lengths = []
    t = 0.0
    for _ in range(5):
        lengths.append(b.open_until - t)
        t = b.open_until
        assert b.permit(t)
        b.record(t, failed=True)  # the probe fails: reopen
    assert lengths == [2.0, 4.0, 8.0, 10.0, 10.0]
    t = b.open_until
    assert b.permit(t)
    b.record(t, failed=False)
    assert b.state == CLOSED
    feed(b, t, "FF")
    assert b.open_until - t == 2.0


def test_results_arriving_while_open_are_ignored():
    """Late results of calls permitted before the trip change nothing while open."""
    b = tripped(open_duration=5.0, half_open_calls=1)
    for failed in (True, False, False, True):
        b.record(1.0, failed=failed)
    assert b.state == OPEN and b.open_until == 5.0 and b.trips == 1
    assert b.permit(5.0)
    b.record(5.0, failed=False)
    assert b.state == CLOSED


def test_the_listener_sees_every_transition_in_order():
    seen = []
    b = breaker(minimum_calls=2, open_duration=1.0, half_open_calls=1)
    b.listener = lambda br, now: seen.append((now, br.state))
    feed(b, 0.0, "FF")
    b.permit(1.0)
    b.record(1.5, failed=True)
    b.permit(2.5)
    b.record(2.6, failed=False)
    assert seen == [(0.0, OPEN), (1.0, HALF_OPEN), (1.5, OPEN), (2.5, HALF_OPEN),
                    (2.6, CLOSED)]


def test_a_threshold_written_in_decimal_trips_at_that_rate():
    """7 failures in 100 calls is a 7% failure rate: ``failure_rate_threshold: 0.07`` must
    trip (Resilience4j compares 7.0 >= 7.0). Found by enumeration: 0.07, 0.14, 0.17, 0.27,
    0.28, 0.34, 0.54, 0.55, 0.56, 0.68, 0.81 are the two-decimal thresholds for which
    ``failures >= threshold * calls`` disagrees with the rate (float rounding of
    threshold * calls); ``failures / calls >= threshold`` agrees for all of them."""
    b = breaker(window_calls=100, minimum_calls=100, failure_rate_threshold=0.07)
    feed(b, 0.0, "F" * 7 + "S" * 93)
    assert b.state == OPEN


# -- properties -------------------------------------------------------------------------------


class Reference:
    """The rules of docs/mitigations.md, written plainly, for a count window."""

    def __init__(self, size, minimum, threshold, open_duration, multiplier, cap, probes):
        self.size, self.minimum, self.threshold = size, minimum, threshold
        self.open_duration, self.multiplier, self.cap, self.probes = (
            open_duration, multiplier, cap, probes)
        self.state, self.results, self.streak = CLOSED, [], 0
        self.open_until, self.granted, self.good = 0.0, 0, 0

    def permit(self, t):
        if self.state == OPEN:
            if t < self.open_until:
                return False
            self.state, self.granted, self.good = HALF_OPEN, 0, 0
        if self.state == HALF_OPEN:
            if self.granted == self.probes:
                return False
            self.granted += 1
        return True

    def record(self, t, failed):
        if self.state == CLOSED:
            self.results = (self.results + [failed])[-self.size:]
            n = len(self.results)
            if n >= self.minimum and sum(self.results) / n >= self.threshold:
                self.trip(t)
        elif self.state == HALF_OPEN:
            if failed:
                self.trip(t)
            else:
                self.good += 1
                if self.good == self.probes:
                    self.state, self.results, self.streak = CLOSED, [], 0

    def trip(self, t):
        length = min(self.cap, self.open_duration * self.multiplier ** self.streak)
        self.state, self.open_until, self.streak = OPEN, t + length, self.streak + 1


steps = st.lists(st.tuples(st.sampled_from([0.0, 0.25, 1.0, 3.0]), st.booleans()),
                 max_size=150)


@settings(max_examples=150, deadline=None)
@given(script=steps, size=st.integers(1, 12), minimum=st.integers(1, 12),
       threshold=st.sampled_from([0.25, 0.5, 0.75, 1.0]), probes=st.integers(1, 4),
       multiplier=st.sampled_from([1.0, 2.0]))
def test_count_window_breaker_matches_the_reference_rules(script, size, minimum, threshold,
                                                          probes, multiplier):
    """Same script, same answers: every permit and every state agree with the reference.
    Thresholds are exact binary fractions (see the decimal-threshold test for the rest)."""
    b = breaker(window_calls=size, minimum_calls=minimum, failure_rate_threshold=threshold,
                open_duration=2.0, open_duration_multiplier=multiplier,
                max_open_duration=5.0, half_open_calls=probes)
    ref = Reference(size, minimum, threshold, 2.0, multiplier, 5.0, probes)
    t = 0.0
    for dt, failed in script:
        t += dt
        allowed = b.permit(t)
        assert allowed == ref.permit(t)
        if allowed:
            b.record(t, failed)
            ref.record(t, failed)
        assert b.state == ref.state
        assert b.open_until == pytest.approx(ref.open_until)


events = st.lists(st.tuples(st.floats(0.0, 2.0), st.sampled_from(["call", "result"]),
                            st.sampled_from(["ok", "fail", "slow"]), st.integers(0, 50)),
                  max_size=200)


@settings(max_examples=150, deadline=None)
@given(script=events, probes=st.integers(1, 4), window=st.sampled_from([1.0, 5.0]),
       minimum=st.integers(1, 6), threshold=st.floats(0.05, 1.0))
def test_no_call_while_open_and_at_most_half_open_calls_probes(script, probes, window,
                                                              minimum, threshold):
    """For any script of calls and late results (in any order), the breaker never permits
    a call while open before ``open_until``, never more than ``half_open_calls`` calls per
    half-open period, and moves only along closed->open->half_open->(open|closed)."""
    b = breaker(window=window, minimum_calls=minimum, failure_rate_threshold=threshold,
                slow_call_threshold=0.5, slow_call_rate_threshold=0.5, open_duration=1.0,
                open_duration_multiplier=1.5, max_open_duration=3.0, half_open_calls=probes)
    legal = {(CLOSED, OPEN), (OPEN, HALF_OPEN), (HALF_OPEN, OPEN), (HALF_OPEN, CLOSED)}
    moves = []
    b.listener = lambda br, now: moves.append(br.state)
    outstanding: list[str] = []
    t, probes_this_period, previous = 0.0, 0, CLOSED
    for dt, kind, result, pick in script:
        t += dt
        if kind == "call":
            state, until = b.state, b.open_until
            allowed = b.permit(t)
            if state == OPEN and t < until:
                assert not allowed and b.state == OPEN
            if b.state == HALF_OPEN:
                if state != HALF_OPEN:
                    probes_this_period = 0
                probes_this_period += allowed
                assert probes_this_period <= probes
            if allowed:
                outstanding.append(result)
        elif outstanding:
            outcome = outstanding.pop(pick % len(outstanding))
            b.record(t, failed=outcome == "fail", slow=outcome == "slow")
    for state in moves:
        assert (previous, state) in legal
        previous = state


# -- in the engine -----------------------------------------------------------------------------

# scenarios/outage.yaml at a tenth of its size (300 workers, 1,000 calls/s), 30 s long, with
# a pool breaker on a 2 s window (the default 30 s window, at 700 calls/s, would hold
# ~14,000 successes: the 4 s outage alone could never reach 40% failures in it).
SCALED = {"duration": "30s", "workload.rate": 700, "workers.count": 300,
          "downstream.concurrency": 200, "downstream.queue_limit": 100,
          "downstream.overload.collapse.threshold": 150, "breaker.enabled": True,
          "breaker.scope": "pool", "breaker.window": "2s", "breaker.open_duration": "3s"}


def watched(scenario) -> tuple[Simulation, list[tuple[float, str, float]]]:
    """A simulation whose breakers log (time, state, open_until) at every transition."""
    sim = Simulation(scenario)
    log: list[tuple[float, str, float]] = []
    for gate in sim.gates:
        forward = gate.breaker.listener

        def listener(b, now, forward=forward):
            log.append((now, b.state, b.open_until))
            forward(b, now)

        gate.breaker.listener = listener
    return sim, log


@pytest.mark.parametrize("mode", ["sleep", "requeue"])
def test_a_pool_breaker_opens_during_the_outage_and_no_call_is_made_while_open(
        scenarios_dir, mode):
    """The brief's rule: while the breaker is open, no worker calls downstream. Checked on
    every open period against the raw call times; the series and summary agree."""
    sim, log = watched(herdsim.load_scenario(scenarios_dir / "outage.yaml",
                                             {**SCALED, "workers.retry_mode": mode}))
    result = Result.from_finished(sim.run())
    ts, s = result.timeseries, result.summary
    outage = ts[(ts["time"] >= 20) & (ts["time"] < 24)]
    assert outage["breaker_open"].max() == 1.0
    assert set(ts["breaker_open"].unique()) <= {0.0, 1.0}  # one breaker: 0 or 1
    assert ts["short_circuited"].sum() == s["calls_avoided"] > 0
    opened = [(t, until) for t, state, until in log if state == OPEN]
    assert s["breaker_trips"] == len(opened) >= 1
    calls = np.asarray(sim.recorder.attempts)
    for start, until in opened:
        assert not ((calls > start) & (calls < until)).any(), (start, until)
    # A queue worker refused by the breaker waits (or parks its job) without spending a
    # retry: every call that did not succeed became a retry sleep, a dead letter or a
    # recycled job, except the calls still in flight at the end (pending jobs).
    undecided = (s["attempts_total"] - s["jobs_succeeded"] - len(result.sleeps)
                 - s["jobs_dead_lettered"] - s["recycled_total"])
    assert 0 <= undecided <= s["jobs_pending"]


def test_breaker_open_time_matches_the_gauge_and_the_transitions(scenarios_dir):
    """``breaker_open_time`` = time spent not closed, from the transition log; the sampled
    gauge integrates to it within one bin per transition."""
    sim, log = watched(herdsim.load_scenario(scenarios_dir / "outage.yaml", SCALED))
    result = Result.from_finished(sim.run())
    end = result.scenario.duration
    spent, since = 0.0, None
    for t, state, _ in log:
        if state == CLOSED and since is not None:
            spent, since = spent + t - since, None
        elif state != CLOSED and since is None:
            since = t
    if since is not None:
        spent += end - since
    assert result.summary["breaker_open_time"] == pytest.approx(spent)
    gauge = result.timeseries["breaker_open"].sum() * result.scenario.bin
    assert abs(gauge - spent) <= result.scenario.bin * len(log)


def recovering(**breaker) -> dict:
    """A 4 s `down` outage at t = 3 s; no crash rule; a breaker with a short window."""
    return {
        "name": "recovering", "seed": 3, "duration": "20s",
        "workload": {"rate": 200},
        "workers": {"count": 40},
        "downstream": {"concurrency": 40, "service": {"mean": "20ms"},
                       "outages": [{"start": "3s", "duration": "4s", "mode": "down"}]},
        "retry": {"strategy": "full_jitter", "base": "100ms", "cap": "2s", "max_retries": 4},
        "breaker": {"enabled": True, "window": "2s", "minimum_calls": 5,
                    "open_duration": "1s", **breaker},
    }


@pytest.mark.parametrize("scope", ["pool", "worker"])
def test_the_breaker_closes_once_the_downstream_is_back(scope):
    """After the outage the probes succeed: every breaker is closed again well before the
    end, and the pool serves the offered load. Worker scope: the gauge is a fraction of
    the 40 breakers."""
    result = herdsim.run(herdsim.load_scenario(recovering(scope=scope)))
    ts = result.timeseries
    assert ts["breaker_open"].between(0, 1).all()
    if scope == "worker":
        assert np.allclose(ts["breaker_open"] * 40, (ts["breaker_open"] * 40).round())
    assert ts.loc[(ts["time"] > 3) & (ts["time"] < 7), "breaker_open"].max() > 0
    assert (ts.loc[ts["time"] >= 15, "breaker_open"] == 0).all()
    late = ts[ts["time"] >= 15]
    assert late["success"].sum() / 5 == pytest.approx(200, rel=0.15)


def test_a_probe_refused_by_the_adaptive_throttle_does_not_wedge_the_breaker():
    """A half-open probe permit that is then refused by the adaptive throttle must be given
    back (or counted): otherwise the pool breaker stays half-open with no probe left, and
    no worker ever calls again. Long outage (20 s) and a 10 s throttle window make the
    throttle refuse calls right when the breaker half-opens."""
    data = recovering(scope="pool")
    data["duration"] = "50s"
    data["downstream"]["outages"] = [{"start": "5s", "duration": "20s", "mode": "down"}]
    data["budget"] = {"kind": "adaptive", "window": "10s"}
    ts = herdsim.run(herdsim.load_scenario(data)).timeseries
    assert (ts.loc[ts["time"] >= 45, "breaker_open"] == 0).all()
    assert ts.loc[ts["time"] >= 40, "success"].sum() > 0

"""The work of a connection herd (herdsim/planning/connections.py): its bound against the
broker engine on scenarios drawn from the schema (``tests/scenario_gen.py``), and the
estimate's place in the one estimate.

Budget: under a second on one core, and ~20 s in the slow tier.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scenario_gen import repaired, scenarios

from herdsim.config.loading import load_scenario
from herdsim.model.downstream import broker
from herdsim.model.recorder import Recorder
from herdsim.planning import connections, estimate
from herdsim.policies.downstreams.broker import BYTES_PER_CLIENT


@pytest.mark.slow  # ~20 s: drawing and mending whole scenarios
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(st.data())
def test_the_bound_holds_on_any_generated_broker(data):
    """A broker scenario drawn from the schema, one outage that drops its connections
    added, run by the broker engine: its drops (jobs)
    are at most clients x the drops the bound counts, and its connects at most the bound
    of calls, when the retries are limited; every client ends in one state."""
    doc = data.draw(scenarios(), label="scenario")
    doc["downstream"]["model"] = "broker"
    doc["downstream"].pop("occ", None)
    doc["downstream"].setdefault("outages", []).append(  # one that drops the connections
        {"mode": data.draw(st.sampled_from(["down", "blackhole"]), label="mode"),
         "start": data.draw(st.floats(0.0, 0.5), label="start"), "duration": 0.3})
    scenario = repaired(doc, data.draw)
    assume(scenario is not None and scenario.downstream.model == "broker")
    guess = estimate.estimate(scenario)
    assume(not guess.unlimited)
    recorder = Recorder()
    herd, pending = broker.reconnect(scenario, recorder)
    clients = scenario.workers.count
    most_drops, _ = connections.drops(scenario)
    assert len(recorder.arrivals) <= clients * most_drops
    assert len(recorder.attempts) <= guess.calls
    assert len(herd.state) == clients
    assert len(recorder.finish_id) + len(pending) == len(recorder.arrivals)


def test_a_million_clients_cost_their_state_in_memory():
    """The estimate of the bundled herd grows with its clients by their bytes each (and
    their connects): a million clients are estimated in the hundreds of megabytes, never
    as a million worker processes (a kilobyte each)."""
    small = load_scenario("scenarios/reconnect.yaml")
    large = load_scenario("scenarios/reconnect.yaml", {"workers.count": "1000000"})
    a, b = estimate.estimate(small), estimate.estimate(large)
    per_client = (b.bytes - a.bytes) / (1_000_000 - 3000)
    assert BYTES_PER_CLIENT < per_client < 1000
    assert b.calls == a.calls * 1_000_000 / 3000
    assert dict(b.parts)["workers"] == 1_000_000 * BYTES_PER_CLIENT


def test_connects_per_drop_take_the_retries_and_drops_the_outages_and_crashes():
    """One down outage and no crash: one drop, 1 + max_retries connects each at most;
    a crash restarting in 3 s over 40 s adds at most 14 more. Time bounds them too: a
    client sleeps 2 s (fixed) before each connect, so from the drop at 5 s to 40 s it
    makes at most 35 / 2 + 1 = 18, fewer than the 16 drops x 5 tries."""
    sc = load_scenario("scenarios/reconnect.yaml", {"retry.max_retries": "4"})
    assert connections.drops(sc)[0] == 1 + 40 // 3 + 1
    guess = estimate.estimate(sc)
    assert guess.calls == 3000 * min((1 + 40 // 3 + 1) * 5, (40 - 5) // 2 + 1)
    once = load_scenario("scenarios/reconnect.yaml", {"retry.max_retries": "0"})
    assert estimate.estimate(once).calls == 3000 * (1 + 40 // 3 + 1)  # fewer: the drops
    assert not guess.unlimited
    plain = load_scenario("scenarios/reconnect.yaml", {"retry.max_retries": "4"})
    plain.downstream.overload.collapse = None
    assert connections.drops(plain) == (1.0, 1.0)


def test_a_million_client_blip_runs_without_force():
    """benchmarks/reconnect.py's run (a million clients, full jitter, 60 s, for ever):
    the old bound took every crash's 20 tries of each client (~1 h of CPU, 22 GB) and
    asked for --force; a client's connects are one a sleep, whose mean (base / 2 = 1 s
    at first, growing) bounds them to 56 from the drop at 5 s, well within the budget."""
    sc = load_scenario("scenarios/reconnect.yaml", {
        "workers.count": "1000000", "retry.strategy": "full_jitter", "duration": "60s"})
    # the mean read off the cdf on a grid of cap / 4096: within a try of 55 / 1 + 1
    assert abs(connections.tries_in_time(sc, unlimited=True) - (60 - 5 + 1)) <= 1
    estimate.check([sc])


@pytest.mark.parametrize("strategy", ["fixed", "exponential", "decorrelated_jitter"])
def test_a_client_connects_at_most_once_a_least_sleep(strategy):
    """The time bound on the engine, retries unlimited and the broker crashing at every
    wave (reconnect.yaml's story, sleeps of at least base = 2 s): each client's connects
    fit one per 2 s from the drop at 5 s to the end at 40 s."""
    sc = load_scenario("scenarios/reconnect.yaml", {"retry.strategy": strategy})
    recorder = Recorder()
    broker.reconnect(sc, recorder)
    assert len(recorder.attempts) <= 3000 * connections.tries_in_time(sc, unlimited=False)
    assert connections.tries_in_time(sc, unlimited=False) == (40 - 5) // 2 + 1

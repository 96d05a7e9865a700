"""A server that slows as it fills, and refusals that cost: the engine against theory,
measured busy time, conservation, and the identity when they are off."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import assert_every_job_ends_in_one_place, tiny
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from small_scenarios import scenarios

import herdsim
from herdsim.model.downstream.core import Downstream
from herdsim.model.downstream.defences import DefendedDownstream
from herdsim.model.simulation import Simulation
from herdsim.results.result import Result


def frames(data: dict) -> tuple[Simulation, Result]:
    sim = Simulation(herdsim.load_scenario(data))
    return sim, Result.from_finished(sim.run())


def saturated(per_call: float, concurrency: int = 10) -> dict:
    """A server kept full (100 workers on an endless backlog, 10 slots, no timeout) whose
    service time is 10 ms × (1 + per_call × calls in service)."""
    return tiny(duration="30s", bin="1s",
                workload={"arrivals": "constant", "rate": 5000},
                workers={"count": 100},
                downstream={"concurrency": concurrency, "queue_limit": None,
                            "service": {"distribution": "constant", "mean": "10ms"},
                            "degradation": {"kind": "contention", "per_call": per_call,
                                            "recovery": "500ms"}})


@pytest.mark.parametrize("per_call", [0.0, 0.1, 0.3])
def test_a_degraded_server_serves_slots_over_service_times_factor(per_call):
    """At constant load the served rate is slots / (service time × factor), the factor
    1 + per_call × slots once the lag has settled (10 s = 20 time constants)."""
    _, res = frames(saturated(per_call))
    ts = res.timeseries
    tail = ts[ts["time"] >= 10.0]
    served = tail["success"].sum() / (len(tail) * 1.0)
    factor = 1 + per_call * 10
    assert served == pytest.approx(10 / (0.010 * factor), rel=0.01)
    assert tail["degradation"].to_numpy() == pytest.approx(factor, rel=1e-6)


def test_the_factor_decays_after_the_load_with_the_recovery_lag():
    """300 jobs/s for 10 s (below capacity: no backlog), then none: the gauge's excess
    over 1 falls as exp(-t / tau) from where it was (tau = 2 s)."""
    data = saturated(0.1)
    data["workload"] = {"arrivals": "constant", "rate": 300, "profile": [
        {"at": "0s", "rate": 300}, {"at": "10s", "rate": 0}]}
    data["downstream"]["degradation"]["recovery"] = "2s"
    _, res = frames(data)
    ts = res.timeseries.set_index("time")["degradation"]
    peak = ts.loc[10.0]
    assert peak == pytest.approx(1 / (1 - 0.3), rel=0.1)  # f = 1 + 0.1 × 300 × 10ms × f
    for t in (12.0, 14.0, 18.0):
        expected = (peak - 1) * math.exp(-(t - 10.0) / 2.0)
        assert ts.loc[t] - 1 == pytest.approx(expected, rel=0.05)


def test_zero_degradation_and_free_refusals_keep_every_frame():
    """per_call 0 draws the same service times; refusal costs of 0 build the plain class:
    the frames are those of the scenario without them (bar the factor's own column)."""
    base = tiny(duration="5s", downstream={"queue_limit": 3, "timeout": "100ms"},
                workload={"rate": 400})
    _, plain = frames(base)
    extra = tiny(duration="5s", workload={"rate": 400}, downstream={
        "queue_limit": 3, "timeout": "100ms",
        "degradation": {"kind": "contention", "per_call": 0, "recovery": "1s"},
        "refusal_cost": {"rejected": 0, "shed": 0, "expired": 0}})
    _, same = frames(extra)
    free = tiny(downstream={"refusal_cost": {"rejected": 0, "rate_limited": 0}})
    assert type(Simulation(herdsim.load_scenario(free)).downstream) is Downstream
    assert (same.timeseries["degradation"] == 1.0).all()
    pd.testing.assert_frame_equal(plain.timeseries,
                                  same.timeseries.drop(columns="degradation"))
    pd.testing.assert_frame_equal(plain.jobs, same.jobs)


def busy_seconds(data: dict) -> tuple[float, int, int]:
    """(slot-seconds busy, refusals, jobs succeeded) of a run, the busy time integrated
    event by event."""
    sim = Simulation(herdsim.load_scenario(data))
    env, ds = sim.env, sim.downstream
    area, last, end = 0.0, 0.0, data["duration"]
    while env.peek() < end:
        now = env.peek()
        area += ds.busy * (now - last)
        last = now
        env.step()
    area += ds.busy * (end - last)
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    return area, int(res.timeseries["rejected"].sum()), res.summary["jobs_succeeded"]


@pytest.mark.parametrize("cost", [0.002, 0.005])
def test_a_refusal_cost_adds_refusals_times_cost_to_the_busy_time(cost):
    """Throttled calls against a server with free slots: each holds a slot for *cost*, so
    busy slot-seconds rise by r × c (r: refusals, measured; same seed, so the same
    arrivals and service times)."""
    data = tiny(duration=30.0, workload={"arrivals": "poisson", "rate": 200},
                workers={"count": 1000},
                downstream={"concurrency": 1000, "rate_limit": {"rate": 100, "burst": 1},
                            "service": {"distribution": "exponential", "mean": "10ms"}},
                retry={"max_retries": 0})
    free, refused, _ = busy_seconds(data)
    data["downstream"]["refusal_cost"] = {"rate_limited": cost}
    paid, refused_too, _ = busy_seconds(data)
    assert refused == refused_too > 2000  # the refusals are the same calls
    assert paid - free == pytest.approx(refused * cost, rel=1e-6)


def test_owed_work_is_paid_before_the_waiting_room():
    """One slot, always busy: a door rejection's 10 ms is owed and paid before the next
    waiting call, so the slot serves 10 ms less for each (service 100 ms: a tenth of a
    call), the waiting room and the run otherwise the same."""
    data = tiny(duration=10.0, workload={"arrivals": "constant", "rate": 40},
                workers={"count": 10}, retry={"max_retries": 0},
                downstream={"concurrency": 1, "queue_limit": 1,
                            "service": {"distribution": "constant", "mean": "100ms"}})
    free, _, served = busy_seconds(data)
    data["downstream"]["refusal_cost"] = {"rejected": "10ms"}
    paid, refused, served_paid = busy_seconds(data)
    assert free == paid == pytest.approx(10.0, abs=0.2)  # busy all run either way
    assert refused > 50
    # all the slot did: calls served, and refusals (the last few possibly still owed)
    assert served_paid * 0.1 + refused * 0.01 == pytest.approx(paid, abs=0.15)
    assert served - served_paid == pytest.approx(refused * 0.01 / 0.1, abs=1.5)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=scenarios(), cost=st.floats(0.0001, 0.05),
       kind=st.sampled_from(["gc", "contention"]))
def test_with_degradation_and_costly_refusals_every_job_ends_in_one_place(data, cost,
                                                                          kind):
    """test_conservation's scenarios, slowed and paying for refusals: slots and the room
    stay within bounds and every job is counted once."""
    ds_cfg = data["downstream"]
    ds_cfg["overload"]["latency_model"] = "at_start"
    ds_cfg["degradation"] = ({"kind": "gc", "memory_per_call": 1, "heap": 200,
                              "recovery": "300ms"} if kind == "gc" else
                             {"kind": "contention", "of": "held", "per_call": 0.05,
                              "recovery": "300ms"})
    ds_cfg["refusal_cost"] = {"rejected": cost, "shed": cost, "rate_limited": cost,
                              "admission": cost, "expired": cost}
    sc = herdsim.load_scenario(data)
    sim = Simulation(sc)
    env, ds = sim.env, sim.downstream
    assert isinstance(ds, Downstream)
    while env.peek() < sc.duration:
        env.step()
        assert 0 <= ds.busy <= sc.downstream.concurrency
        assert 0 <= ds.n_waiting <= (sc.downstream.queue_limit or math.inf)
    assert_every_job_ends_in_one_place(sim, sim.run())


def test_the_costly_class_keeps_the_defences():
    """Costs put in front of a defended server keep its defences."""
    data = tiny(downstream={"shedding": {"above": 1, "probability": 0.5},
                            "refusal_cost": {"shed": "1ms"}})
    sim = Simulation(herdsim.load_scenario(data))
    assert isinstance(sim.downstream, DefendedDownstream)


OVERLOADED = {"duration": 5.0, "workload": {"arrivals": "poisson", "rate": 400},
              "workers": {"count": 60}, "retry": {"max_retries": 1}}


@pytest.mark.parametrize("downstream, cost, counted", [
    ({"queue_limit": 2}, "rejected", "rejected"),
    ({"queue_limit": None, "shedding": {"above": 2, "probability": 0.2}}, "shed",
     "shed_shedding"),
    ({"queue_limit": None, "codel": {}}, "shed", "shed_codel"),
    ({"queue_limit": None, "admission": {"kind": "fixed", "limit": 6}}, "admission",
     "shed_admission"),
    ({"queue_limit": None, "rate_limit": {"rate": 150, "burst": 1}}, "rate_limited",
     "rejected"),
])
def test_each_refusal_is_charged_to_its_own_cost(downstream, cost, counted):
    """Only the refusals of the priced kind take a slot: the count of costly refusals is
    that mechanism's own counter (the door's 503s and the limiter's 429s are the
    ``rejected`` counter when no other mechanism refuses)."""
    others = {name: 0 for name in ("rejected", "shed", "rate_limited", "admission",
                                   "expired")}
    data = tiny(**OVERLOADED, downstream={
        "concurrency": 4, "timeout": "50ms", **downstream,
        "refusal_cost": {**others, cost: "1ms"}})
    _, res = frames(data)
    ts = res.timeseries
    assert ts[counted].sum() > 20
    assert ts["costly_refusals"].sum() == ts[counted].sum()


def test_calls_expiring_in_the_room_are_charged_when_their_client_leaves():
    """``expired``: every waiting call whose client gives up (serve_abandoned false) is
    charged once: as many as the client timeouts of calls that never started (no call
    here is refused or served late: an unbounded room, a timeout below the service)."""
    data = tiny(**OVERLOADED, downstream={
        "concurrency": 2, "queue_limit": None, "timeout": "30ms",
        "service": {"distribution": "constant", "mean": "40ms"},
        "refusal_cost": {"expired": "1ms"}})
    _, res = frames(data)
    ts = res.timeseries
    expired = ts["timeouts"].sum() - ts["wasted"].sum()  # timed out before service
    assert expired > 20
    # (the 2 calls in service at the end: their timeouts counted, their waste not yet)
    assert ts["costly_refusals"].sum() == pytest.approx(expired, abs=2)


def test_a_comparison_of_arms_with_and_without_them_is_saved_and_read_back(tmp_path):
    """The factor is a gauge (empty in an arm without it, averaged when bins merge) and
    costly refusals a counter (0 in an arm without them): the saved folder reads back."""
    from herdsim.outputs.compare_dir import load_outputs

    data = tiny(duration=3.0, workload={"rate": 300}, downstream={"queue_limit": 2})
    c = herdsim.compare(herdsim.load_scenario(data), vary={
        "downstream.refusal_cost": [None, {"rejected": "1ms"}],
        "downstream.degradation": [None, {"kind": "contention", "per_call": 0.2,
                                          "recovery": "1s"}]},
        processes=1, progress=False)
    herdsim.save(c, tmp_path / "out", formats=())
    ts = load_outputs(tmp_path / "out").timeseries
    assert ts["degradation"].isna().any() and ts["degradation"].max() > 1
    assert (ts["costly_refusals"] >= 0).all() and ts["costly_refusals"].sum() > 0


def test_a_graphs_degrading_service_has_its_factor_per_tier():
    """db (200 slots of 5 ms) slowing by 2% a call in service: its factor is sampled at
    every bin start into ``db_degradation`` (a service's was never sampled nor written),
    1 at rest at t = 0, above 1 while the arrivals last, at most 1 + 0.02 × 200, and back
    to 1 once they stopped (4 s) and its 200 ms lag has run out; the tier's summary gives
    its peak and its last value; the timeline draws it under the tier's name. The other
    tiers have none."""
    from conftest import graph

    per_call, slots = 0.02, 200
    res = herdsim.run(herdsim.load_scenario(graph(**{"services.db.degradation": {
        "kind": "contention", "per_call": per_call, "recovery": "200ms"}})))
    factor = res.timeseries["db_degradation"]
    assert factor.iloc[0] == 1.0 and factor.max() > 1.0
    assert factor.max() <= 1 + per_call * slots and factor.min() >= 1.0
    assert factor.iloc[-1] == pytest.approx(1.0, abs=1e-9)
    assert not {"degradation", "api_degradation", "front_degradation"} & set(res.timeseries)
    db = res.summary["tiers"]["db"]
    assert db["degradation_peak"] == factor.max() and db["degradation_end"] == factor.iloc[-1]
    assert "degradation_peak" not in res.summary["tiers"]["api"]
    titles = [ax.get_title(loc="left") for ax in res.plot("timeline").axes]
    assert any(t.startswith("db's degradation: the factor on the service time") for t in titles)


def test_a_services_factor_panel_starts_at_zero_as_the_downstreams_does():
    """A factor wobbling between 1.056 and 1.058 autoscaled to fill its panel and read as
    a fall: a service's factor panel starts at 0, like the workers' downstream's."""
    from conftest import graph

    res = herdsim.run(herdsim.load_scenario(graph(**{"services.db.degradation": {
        "kind": "contention", "per_call": 0.0005, "recovery": "200ms"}})))
    panel = next(ax for ax in res.plot("timeline").axes
                 if ax.get_title(loc="left").startswith("db's degradation"))
    assert panel.get_ylim()[0] == 0.0 and panel.get_ylim()[1] >= 1.0


def test_a_graphs_costly_refusals_are_counted_per_tier():
    """db (20 slots, a waiting room of 10) behind an api that sends it 3 calls a job,
    its door rejections costing 5 ms of a slot: every rejection is a costly refusal, one
    for one with the tier's own rejections, in ``db_costly_refusals`` and
    ``tiers.db.costly_refusals_total`` (a service's were counted, then never written)."""
    from conftest import graph

    sim, res = frames(graph(**{
        "workload.rate": 400, "workload.profile": [{"at": 0, "rate": 400}],
        "duration": "5s", "services.db.concurrency": 20, "services.db.queue_limit": 10,
        "services.db.refusal_cost": {"rejected": "5ms"}}))
    rejected = len(sim.tiers["db"].rejected)
    assert rejected > 0
    assert int(res.timeseries["db_costly_refusals"].sum()) == rejected
    assert res.summary["tiers"]["db"]["costly_refusals_total"] == rejected
    assert "costly_refusals_total" not in res.summary["tiers"]["api"]


def test_a_graphs_arms_with_and_without_a_services_degradation_read_back(tmp_path):
    """A service's factor is a gauge like the run's own (empty in an arm without it),
    its costly refusals a counter: the saved comparison reads back (the reader took
    db_degradation for a counter and refused its 1.04)."""
    from conftest import graph

    from herdsim.outputs.compare_dir import load_outputs

    data = graph(**{"duration": "5s", "services.db.concurrency": 20,
                    "services.db.queue_limit": 10,
                    "workload.profile": [{"at": 0, "rate": 400}], "workload.rate": 400})
    c = herdsim.compare(herdsim.load_scenario(data), vary={
        "services.db.refusal_cost": [None, {"rejected": "1ms"}],
        "services.db.degradation": [None, {"kind": "contention", "per_call": 0.05,
                                           "recovery": "1s"}]},
        processes=1, progress=False)
    herdsim.save(c, tmp_path / "out", formats=())
    ts = load_outputs(tmp_path / "out").timeseries
    assert ts["db_degradation"].isna().any() and ts["db_degradation"].max() > 1
    assert ts["db_degradation"].dropna().mod(1).gt(0).any()  # not whole numbers
    assert ts["db_costly_refusals"].sum() > 0

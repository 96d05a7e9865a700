"""A tier with replicas (``model/downstream/fleet.py``): every call lands on one replica,
a replica's outage is its own, its streams are its own, retries avoid the hosts tried
(``previous_hosts``), the panic threshold, a call graph's service with replicas, and
power-of-two choices against the supermarket model's mean field (slow)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SCENARIOS, assert_every_job_ends_in_one_place, graph, tiny

import herdsim
from herdsim.config.loading import load_scenario, validate
from herdsim.model.downstream import fleet
from herdsim.model.simulation import Simulation, _service_draws


def fleet_scenario(n=4, outage=None, balancer=None, health_check=None, **changes):
    down = {"replicas": n, "concurrency": 5, "service": {"distribution": "exponential",
                                                         "mean": 0.05},
            "timeout": 1.0, "outages": [outage] if outage else []}
    if balancer is not None:
        down["balancer"] = balancer
    if health_check is not None:
        down["health_check"] = health_check
    return tiny(duration=20, workload={"rate": 100}, workers={"count": 30},
                downstream=down, **changes)


def replica_calls(ts, n):
    return np.array([ts[f"replica{i}_calls"].to_numpy() for i in range(n)])


def test_every_attempt_lands_on_one_replica_and_every_job_ends_once():
    sc = validate(fleet_scenario(outage={"mode": "down", "start": 5, "duration": 5,
                                         "replica": 1}))
    sim = Simulation(sc)
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    ts = res.timeseries
    assert (replica_calls(ts, 4).sum(axis=0) == ts["attempts"].to_numpy()).all()


def test_an_outage_on_one_replica_is_its_own():
    """A down replica refuses every call it gets while it lasts, and the other replicas
    refuse none (their waiting rooms are unbounded): the refusals are its calls."""
    res = herdsim.run(validate(fleet_scenario(
        outage={"mode": "down", "start": 5, "duration": 5, "replica": 2})))
    ts = res.timeseries
    during = (ts["time"] >= 5) & (ts["time"] < 10)
    assert ts.loc[during, "rejected"].sum() == ts.loc[during, "replica2_calls"].sum() > 0
    assert ts.loc[~during, "rejected"].sum() == 0
    assert (ts.loc[during, "replica2_in_flight"] == 0).all()


def test_a_replicas_draws_do_not_depend_on_how_many_there_are():
    """Replica i's streams are spawned by its own key: the service times replica 0
    draws are the same with 2 replicas or 7."""
    def first_draws(n):
        sc = validate(fleet_scenario(n))
        sim = Simulation(sc)
        built = fleet.build(sim.env, sc.downstream, sim.recorder, sc.seed, 0, _service_draws)
        return [built.replicas[0].service._draw() for _ in range(20)]
    assert first_draws(2) == first_draws(7)


def test_previous_hosts_halves_the_retries_back_to_the_sick_host():
    """Two replicas, one refusing every call, random picks, retries unlimited in effect:
    without the predicate a job needs 1 / (1/2) = 2 attempts on average; with it, a retry
    lands on the tried host only if both of its picks do (1/4), so 1 + (1/2) × 4/3 =
    5/3. ~2,000 jobs: the standard error of the mean is about 0.02."""
    def mean_attempts(previous):
        res = herdsim.run(validate(fleet_scenario(
            n=2, outage={"mode": "down", "start": 0, "duration": 20, "replica": 1},
            balancer={"kind": "random", "previous_hosts": previous},
            retry={"strategy": "fixed", "base": 0.001, "max_retries": 50})))
        done = res.jobs[res.jobs["outcome"] == "succeeded"]
        return done["attempts"].mean()
    assert abs(mean_attempts(False) - 2.0) < 0.1
    assert abs(mean_attempts(True) - 5 / 3) < 0.1


def test_the_panic_threshold_keeps_every_host_in_play():
    """The bundled fleet with ejection after one failure and no limit: with no panic
    threshold every replica ends up ejected and calls find no healthy host; at 50% the
    balancer picks among all of them instead."""
    def no_host(panic):
        sc = load_scenario(SCENARIOS / "fleet.yaml", {
            "duration": "40s", "downstream.outlier_detection.consecutive_5xx": "1",
            "downstream.outlier_detection.max_ejection_percent": "100",
            "downstream.outages.0.duration": "15s",
            "downstream.balancer.panic_threshold": str(panic)})
        ts = herdsim.run(sc).timeseries
        return ts["no_healthy_host"].sum(), ts[[f"replica{i}_ejections"
                                                for i in range(10)]].to_numpy().sum()
    refused, ejections = no_host(0)
    assert refused > 0 and ejections >= 10
    refused, ejections = no_host(50)
    assert refused == 0 and ejections > 0


def test_a_graph_service_with_replicas():
    """A call graph's leaf with replicas: every replica serves, and the tier counts each
    call its replicas got (the tier's calls are the replicas' calls)."""
    data = graph()
    data["services"]["db"]["replicas"] = 3
    data["services"]["db"]["balancer"] = {"kind": "least_request"}
    sim = Simulation(validate(data))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    fleets = {id(e.callee): e.callee for edges in sim.edges.values() for e in edges
              if isinstance(e.callee, fleet.Fleet)}
    assert len(fleets) == 1
    (db,) = fleets.values()
    record = sim.tiers["db"]
    served = [len(record.optional[f"replica{i}_calls"]) for i in range(3)]
    assert all(n > 0 for n in served) and len(db.replicas) == 3
    assert res.timeseries["db_calls"].sum() == sum(served) == len(record.attempts)


@pytest.mark.slow
def test_power_of_two_choices_against_the_supermarket_mean_field():
    """Mitzenmacher's supermarket model: n servers, Poisson arrivals at λn, exponential
    service at rate 1, each arrival joins the shorter of d = 2 random queues. As n → ∞
    the fraction of queues with at least k jobs is λ^(2^k − 1): 0.9, 0.729, 0.478, 0.206
    at λ = 0.9. 100 replicas of one slot, open loop, 4,000 s sampled each second after
    400 s of warm-up: within 0.02 for k = 1..3; k = 4 within 0.03, since at n = 100 the
    tail sits above the n → ∞ limit (the rule's own jump chain, tests/policies/
    test_balancers.py's ``supermarket``, gives 0.217–0.223 over 2 million events against
    the limit's 0.206)."""
    sc = validate(tiny(
        duration=4000, bin=1.0, workload={"rate": 90.0, "arrivals": "poisson"},
        workers={"count": None},
        retry={"max_retries": 0},
        downstream={"replicas": 100, "concurrency": 1, "queue_limit": None,
                    "timeout": None, "balancer": {"kind": "least_request"},
                    "service": {"distribution": "exponential", "mean": 1.0}}))
    ts = herdsim.run(sc).timeseries
    ts = ts[ts["time"] >= 400]
    depth = np.array([ts[f"replica{i}_in_flight"].to_numpy() for i in range(100)])
    for k in range(1, 5):
        assert abs((depth >= k).mean() - 0.9 ** (2 ** k - 1)) < (0.02 if k < 4 else 0.03), k


def test_active_health_checks_take_a_down_replica_out_and_back():
    """Probes every 0.5 s: 3 failures in a row take replica 1 out (by 1.5 s after its
    outage starts), 2 passes put it back (by 1 s after it ends); while it is out it gets
    no calls (5 of 4 replicas stay healthy: no panic)."""
    res = herdsim.run(validate(fleet_scenario(
        outage={"mode": "down", "start": 5, "duration": 8, "replica": 1},
        health_check={"interval": 0.5, "unhealthy_threshold": 3, "healthy_threshold": 2},
        bin=0.25)))
    ts = res.timeseries
    out = ts.loc[ts["replica1_healthy"] < 0.5, "time"]
    assert 5.0 < out.min() <= 6.75 and 12.75 <= out.max() <= 14.0
    inside = ts["time"].between(out.min(), out.max() - 0.25)
    assert ts.loc[inside, "replica1_calls"].sum() == 0


def test_a_client_scoped_balancer_keeps_a_view_per_caller():
    """scope: client: each worker that called has its own round-robin position (its own
    view; the plain loop hands jobs to the last idle worker first, so at this load not
    all 30 ever call); every replica still gets about a quarter of the calls."""
    sc = validate(fleet_scenario(balancer={"kind": "round_robin", "scope": "client"}))
    sim = Simulation(sc)
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    assert 1 < len(sim.downstream._views) <= 30
    calls = replica_calls(res.timeseries, 4).sum(axis=1)
    assert (abs(calls / calls.sum() - 0.25) < 0.03).all()


@pytest.mark.parametrize("n", [1, 2])
def test_degrading_replicas_sample_their_factor_every_bin(n):
    """replicas x degradation: each replica degrades on its own, and the run's
    ``degradation`` column is sampled every bin (it was registered by each replica and
    never sampled: the frame's padding crashed on the empty column). Offered 400 jobs/s to
    10 x 2 replicas slots of 20 ms (1,000/s) its heap holds calls: the factor stays >= 1."""
    doc = tiny(duration=10, workload={"rate": 400}, workers={"count": 50},
               downstream={"concurrency": 10, "replicas": n,
                           "service": {"distribution": "constant", "mean": "20ms"},
                           "degradation": {"kind": "gc", "memory_per_call": 1.0,
                                           "heap": 10.0, "recovery": 1.0}})
    sim = Simulation(load_scenario(doc))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    factor = res.timeseries["degradation"].to_numpy()
    assert len(factor) == sim.n_bins
    assert (factor >= 1.0).all()

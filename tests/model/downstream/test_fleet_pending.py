"""Envoy's ``max_pending_requests`` on a fleet (``balancer.max_pending_requests``): the
calls waiting at the replicas never exceed it, a call over it fails at once (counted in
``pending_overflow`` and ``rejected``, sent to no replica), a call finding a free slot is
never refused, and a client-scoped balancer refuses the field."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_every_job_ends_in_one_place, tiny

from herdsim.config.loading import validate
from herdsim.errors import ScenarioError
from herdsim.model.simulation import Simulation

LIMIT = 6


def scenario(limit=LIMIT, scope="proxy"):
    """4 replicas of 5 slots (100 ms: 200 calls/s in all) under 320 jobs/s for 3 s: the
    rooms (unbounded) fill."""
    balancer = {"kind": "least_request", "scope": scope}
    if limit is not None:
        balancer["max_pending_requests"] = limit
    return validate(tiny(
        duration=8, workload={"rate": 320, "profile": [{"at": 0, "rate": 320},
                                                       {"at": 3, "rate": 20}]},
        workers={"count": 200},
        downstream={"replicas": 4, "concurrency": 5, "timeout": 2.0, "balancer": balancer,
                    "service": {"distribution": "exponential", "mean": 0.1}}))


def run(limit):
    sim = Simulation(scenario(limit))
    waits: list[int] = []
    ds = sim.downstream
    for r in ds.replicas:
        def spy(proc, timeout, own=r.call):  # the calls waiting once a call is placed
            c = own(proc, timeout)
            waits.append(ds.n_waiting)
            return c
        r.call = spy
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    return res, np.array(waits)


def test_the_waiting_calls_never_exceed_the_limit():
    unlimited, waits = run(None)
    assert waits.max() > 3 * LIMIT  # without it, the rooms hold far more
    res, waits = run(LIMIT)
    assert waits.max() <= LIMIT
    ts = res.timeseries
    overflow = int(ts["pending_overflow"].sum())
    assert overflow > 0
    assert int(ts["rejected"].sum()) == overflow  # the rooms are unbounded: no other refusal
    replicas = sum(int(ts[f"replica{i}_calls"].sum()) for i in range(4))
    assert replicas == int(ts["attempts"].sum()) - overflow  # an overflow reaches no replica


def test_zero_pending_means_a_call_waits_nowhere():
    """Envoy's max_pending_requests 0: a call either gets a slot or fails at once."""
    res, waits = run(0)
    assert waits.max() == 0
    assert (res.timeseries["waiting"] == 0).all()


def test_a_client_scoped_balancer_refuses_it():
    with pytest.raises(ScenarioError, match="needs scope: proxy"):
        scenario(scope="client")

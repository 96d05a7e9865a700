"""A cache in front of a tier with replicas (``model/cache.py`` on a ``Fleet``): every
job ends once, a hit never reaches a replica (the replicas' calls are the flights), a
flush outage on the fleet bypasses the cache, a hash balancer hashes the cache's key,
and a flush outage on one replica is refused."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from conftest import assert_every_job_ends_in_one_place, tiny

from herdsim.config.loading import validate
from herdsim.errors import ScenarioError
from herdsim.model.simulation import Simulation


def scenario(outages=(), balancer=None, **cache):
    down = {"replicas": 3, "concurrency": 5, "timeout": 1.0,
            "service": {"distribution": "exponential", "mean": 0.05},
            "outages": list(outages),
            "cache": {"size": 20, "keys": {"distribution": "zipf", "alpha": 1.0,
                                           "count": 200}, **cache}}
    if balancer is not None:
        down["balancer"] = balancer
    return validate(tiny(duration=12, workload={"rate": 150}, workers={"count": 30},
                         downstream=down))


def replica_calls(ts):
    return np.array([ts[f"replica{i}_calls"].to_numpy() for i in range(3)]).sum(axis=0)


@pytest.mark.parametrize("outages", [
    [], [{"mode": "flush", "start": 4, "duration": 2}],
    [{"mode": "down", "start": 3, "duration": 2, "replica": 1},
     {"mode": "flush", "start": 6, "duration": 0.5}]], ids=["plain", "flush", "down+flush"])
def test_every_job_ends_once_and_hits_never_reach_a_replica(outages):
    """No coalescing, no stale entries: each miss is one flight, one call to one replica;
    each hit is none. Bin by bin, the replicas' calls are the misses."""
    sim = Simulation(scenario(outages))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    ts = res.timeseries
    assert ts["cache_hits"].sum() > 0
    assert (replica_calls(ts) == ts["cache_misses"].to_numpy()).all()
    assert (ts["attempts"] == ts["cache_misses"]).all()  # the tier counts its flights
    if outages:  # while a flush holds, nothing hits
        flush = next(o for o in outages if o["mode"] == "flush")
        during = (ts["time"] >= flush["start"]) & (
            ts["time"] + 1 <= flush["start"] + flush["duration"])
        assert ts.loc[during, "cache_hits"].sum() == 0


def test_coalesced_misses_do_not_reach_a_replica():
    """With single-flight, the replicas' calls are the misses less the coalesced ones."""
    sim = Simulation(scenario(coalesce=True))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    ts = res.timeseries
    assert ts["cache_coalesced"].sum() > 0
    assert replica_calls(ts).sum() == ts["cache_misses"].sum() - ts["cache_coalesced"].sum()


def test_a_hash_balancer_hashes_the_caches_key():
    """Ring hash behind the cache: every flight for one key goes to one replica."""
    sim = Simulation(scenario(balancer={"kind": "ring_hash"}))
    ds, hosts = sim.downstream, defaultdict(set)
    for i, r in enumerate(ds.replicas):
        def call(proc, timeout, i=i, own=r.call):
            hosts[proc.key].add(i)
            return own(proc, timeout)
        r.call = call
    sim.run()
    assert len(hosts) > 20 and all(len(h) == 1 for h in hosts.values())
    assert len(set().union(*hosts.values())) == 3


def test_a_flush_on_one_replica_is_refused():
    with pytest.raises(ScenarioError, match="takes no replica"):
        scenario([{"mode": "flush", "start": 4, "duration": 2, "replica": 0}])

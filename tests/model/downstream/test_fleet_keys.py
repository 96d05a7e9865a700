"""Hash balancers on the request's key (``Fleet.key_of``): with ``workload.keys`` a
call hashes its job's key, so the same key always lands on the same replica while the
host set does not change; without keys, each caller is its own key."""

from __future__ import annotations

from collections import defaultdict

import pytest
from conftest import assert_every_job_ends_in_one_place, tiny

from herdsim.config.loading import validate
from herdsim.model.hand import NotingHand
from herdsim.model.simulation import Simulation


def scenario(kind, keys=None, **workload):
    down = {"replicas": 5, "concurrency": 10, "timeout": 2.0,
            "service": {"distribution": "exponential", "mean": 0.02},
            "balancer": {"kind": kind}}
    return validate(tiny(duration=10, workload={"rate": 200, "keys": keys, **workload},
                         workers={"count": 20}, downstream=down))


def landings(sim):
    """Every call's (hash key, replica), noted as the replica gets it."""
    ds, seen = sim.downstream, []
    for i, r in enumerate(ds.replicas):
        def call(proc, timeout, i=i, own=r.call):
            seen.append((ds.key_of(proc), i))
            return own(proc, timeout)
        r.call = call
    return seen


@pytest.mark.parametrize("kind", ["ring_hash", "maglev"])
def test_the_same_key_always_lands_on_the_same_replica(kind):
    """40 keys over 5 replicas, no outage (the host set never changes): every key's
    calls go to one replica, and the keys spread over more than one."""
    sim = Simulation(scenario(kind, keys=40))
    assert isinstance(sim.in_hand, NotingHand)
    seen = landings(sim)
    assert_every_job_ends_in_one_place(sim, sim.run())
    hosts = defaultdict(set)
    for key, host in seen:
        hosts[key].add(host)
    assert len(seen) > 1000 and all(key < 0 for key in hosts)  # request keys, not callers
    assert all(len(h) == 1 for h in hosts.values())
    assert len(set().union(*hosts.values())) > 1
    assert len(hosts) == 40


def test_the_hash_key_is_the_jobs_not_the_workers():
    """A worker holds jobs of many keys: its calls land on several replicas (with the
    caller as the key they would all land on one)."""
    sim = Simulation(scenario("ring_hash", keys=40))
    ds, by_worker = sim.downstream, defaultdict(set)
    for i, r in enumerate(ds.replicas):
        def call(proc, timeout, i=i, own=r.call):
            by_worker[proc].add(i)
            return own(proc, timeout)
        r.call = call
    sim.run()
    assert max(len(h) for h in by_worker.values()) > 1


def test_without_keys_each_caller_is_its_key():
    sim = Simulation(scenario("maglev"))
    assert type(sim.in_hand) is set
    seen = landings(sim)
    sim.run()
    hosts = defaultdict(set)
    for key, host in seen:
        hosts[key].add(host)
    assert all(key >= 0 for key in hosts) and 1 < len(hosts) <= 20  # the workers that called
    assert all(len(h) == 1 for h in hosts.values())

"""Untrusted call graphs: any structure a file under 1 MiB can hold is walked without
recursion and bounded (services, depth), so it is one error naming ``services``."""

from __future__ import annotations

import random

import pytest

import herdsim
from herdsim.config import graph
from herdsim.errors import ScenarioError

BASE = {"name": "g", "seed": 1, "duration": "2s", "workload": {"rate": 5},
        "workers": {"count": 2},
        "downstream": {"concurrency": 4, "service": {"mean": "5ms"},
                       "calls": [{"service": "s0", "timeout": "1s"}]}}


def _chain(n: int, cycle: bool = False) -> dict:
    """The workers' downstream calls s0, s0 calls s1, ... s(n-1) (calls s0 if *cycle*)."""
    services = {}
    for i in range(n):
        nxt = f"s{i + 1}" if i < n - 1 else ("s0" if cycle else None)
        services[f"s{i}"] = {"calls": [{"service": nxt, "timeout": "1s"}]} if nxt else {}
    return {**BASE, "services": services}


@pytest.mark.slow
@pytest.mark.parametrize("cycle", [False, True])
def test_thousands_of_services_are_one_error_not_a_crash(cycle):
    with pytest.raises(ScenarioError) as refused:
        herdsim.load_scenario(_chain(3000, cycle))
    assert refused.value.problems[0][0] == "services"
    assert f"at most {graph.MAX_SERVICES}" in str(refused.value)


@pytest.mark.parametrize("n", [graph.MAX_SERVICES - 1, graph.MAX_SERVICES])
def test_a_long_cycle_within_the_count_is_named_shortly(n):
    with pytest.raises(ScenarioError, match="form a cycle: s0 -> s1 -> s2 -> … ") as refused:
        herdsim.load_scenario(_chain(n, cycle=True))
    assert f"({n} services)" in str(refused.value)
    assert len(str(refused.value)) < 200  # one readable line, not n names


def test_the_depth_limit_counts_tiers_on_the_longest_path():
    deepest = graph.MAX_DEPTH - 1  # services below the workers' downstream
    assert herdsim.load_scenario(_chain(deepest)).services  # MAX_DEPTH tiers: accepted
    with pytest.raises(ScenarioError) as refused:
        herdsim.load_scenario(_chain(deepest + 1))
    field, problem = refused.value.problems[0]
    assert field == f"services.s{deepest}"
    assert problem.startswith(f"{graph.MAX_DEPTH + 1} tiers deep")


def test_callers_come_before_their_callees_in_any_dag():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(1, 30)
        names = [f"t{i}" for i in range(n)]
        every = {name: graph.Caller(calls=[
            {"service": names[j], "timeout": 1.0}
            for j in rng.sample(range(i + 1, n), k=min(n - i - 1, rng.randint(0, 3)))])
            for i, name in enumerate(names)}
        order = graph.callers_first(every)
        assert sorted(order) == sorted(names)
        place = {name: k for k, name in enumerate(order)}
        assert all(place[name] < place[edge.service]
                   for name, tier in every.items() for edge in tier.calls)

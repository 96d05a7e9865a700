"""The health rule without a trigger, for a workload bursty by design: a backlog the
arrivals themselves bring (25 monitors in step) is not a degradation; a growing one is.

The bundled ``periodic`` scenario: 25 clients every 10 s, one slot of 200 ms, so a
cycle's work is 25 x 0.2 = 5 s of each 10 s interval (load 0.5, drained every cycle);
60 clients bring 12 s of work per 10 s (load 1.2), a backlog that grows without end.
"""

from __future__ import annotations

import pytest
import yaml
from conftest import SCENARIOS

import herdsim
from herdsim.policies.arrivals.periodic import Periodic

PERIODIC = SCENARIOS / "periodic.yaml"


def run(**overrides) -> herdsim.Result:
    doc = yaml.safe_load(PERIODIC.read_text())
    doc["workload"].update(overrides)
    return herdsim.run(doc)


@pytest.mark.parametrize("offset", ["aligned", "random"])
def test_a_healthy_periodic_workload_is_not_degraded(offset):
    """Load 0.5: every cycle drains before the next (the aligned burst queues 25 at a bin
    start, random offsets a call or two); all 300 calls succeed but those that arrive
    within a cycle's work (5 s) of the end, which may still be in service."""
    res = run(offset=offset)
    jobs = res.jobs
    assert res.summary["jobs_submitted"] == 300
    late = jobs["arrival"] > res.scenario.duration - 25 * 0.2
    assert (jobs.loc[~late, "outcome"] == "succeeded").all()
    assert set(jobs.loc[late, "outcome"]) <= {"succeeded", "pending"}
    assert res.summary["state"] == "recovered"


@pytest.mark.parametrize("offset", ["aligned", "random"])
def test_an_overloaded_periodic_workload_is_still_degraded(offset):
    """Load 1.2: the backlog grows by 2 s of work each cycle, whatever the offsets."""
    assert run(offset=offset, clients=60).summary["state"] != "recovered"


def test_clients_in_step_arrive_together():
    """What the rule allows for: every client in one instant when aligned, one otherwise."""
    fields = {"arrivals": "periodic", "clients": 25, "interval": 10.0}
    assert Periodic(**fields, offset="aligned").together() == 25
    assert Periodic(**fields, offset="random").together() == 1

"""Every valid scenario runs and tells the truth.

Scenarios are drawn from the schema itself (``tests/scenario_gen.py``): graphs of 1-4
tiers with fan-out, hedged and retried edges, deadlines and cancellation, every
discipline, CoDel, shedding, each admission kind, every outage mode on any tier, keys,
autoscaling, rate profiles and traces, breakers and budgets of each scope, presets, open
and closed loop. Each one that validation accepts must run, and:

* every job ends in exactly one place (succeeded, dead-lettered, merged or pending; a job
  the full main queue refused never entered), counted from the model itself;
* at every tier below the workers, every call is counted once: what its callers' edges
  heard (succeeded, failed, a hedged copy or a cancelled one each a call) is what the
  tier counted, and no call is heard before it was made;
* the same seed gives the same frames and the same summary (but its wall-clock keys);
* no sleep is negative and no count is NaN.

``HERDSIM_SCENARIOS=20000 pytest tests/test_any_scenario.py -p no:randomly`` runs the
long census; the suite runs a short, fixed profile of it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest
from conftest import assert_every_job_ends_in_one_place
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scenario_gen import repaired, scenarios

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.planning.estimate import estimate
from herdsim.results.result import Result

PROFILE = int(os.environ.get("HERDSIM_SCENARIOS", "60"))
MAX_CALLS = 150_000  # the estimate's upper bound: each run well under a second
WALL_CLOCK = ("wall_seconds", "calls_per_wall_second")


def run(scenario) -> tuple[Simulation, Result]:
    sim = Simulation(scenario)
    return sim, assert_every_job_ends_in_one_place(sim, sim.run())


def assert_calls_counted_once(sim: Simulation) -> None:
    """Below the workers, a tier's outcomes are what its callers' edges heard, one each,
    and none heard before it was made (a call on a request leg reaches the tier later)."""
    into: dict[str, list] = {}
    for edges in sim.edges.values():
        for edge in edges:
            into.setdefault(edge.callee.record.name, []).append(edge)
    for name, edges in into.items():
        record = edges[0].callee.record
        heard_ok = sum(e.succeeded for e in edges)
        heard_failed = sum(e.failed for e in edges)
        assert (len(record.succeeded), len(record.failed)) == (heard_ok, heard_failed), name
        sent = sum(e.sent for e in edges)
        assert len(record.attempts) <= sent, f"{name} counted calls nobody sent"
        if edges[0].callee.call == edges[0].callee.admit:  # no request leg
            assert len(record.attempts) == sent, name
            assert heard_ok + heard_failed <= sent, f"{name}: a call heard twice"


def assert_nothing_negative_or_nan(res: Result) -> None:
    assert (res.sleeps["sleep"].to_numpy() >= 0).all(), "a negative sleep"
    counts = res.timeseries.select_dtypes("number")
    assert not counts.isna().to_numpy().any(), "a NaN in the time series"
    for key, value in res.summary.items():
        if isinstance(value, float):
            assert not math.isnan(value), f"summary {key} is NaN"


def assert_same(a: Result, b: Result) -> None:
    for frame in ("timeseries", "sleeps", "jobs"):
        pd.testing.assert_frame_equal(getattr(a, frame), getattr(b, frame), check_exact=True)
    drop = lambda s: {k: v for k, v in s.items() if k not in WALL_CLOCK}  # noqa: E731
    assert drop(a.summary) == drop(b.summary)


@settings(max_examples=PROFILE, deadline=None, derandomize=PROFILE <= 200, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(st.data())
def test_any_valid_scenario_runs_and_counts_every_job_and_call_once(data):
    scenario = repaired(data.draw(scenarios(), label="scenario"), data.draw)
    assume(scenario is not None)
    assume(estimate(scenario).calls <= MAX_CALLS)
    sim, res = run(scenario)
    assert_calls_counted_once(sim)
    assert_nothing_negative_or_nan(res)
    assert_same(res, run(scenario)[1])


def test_the_generator_reaches_every_corner_of_the_schema():
    """The profile is worth running only if its scenarios cover the schema: a hedged
    edge, a graph of 4 tiers, every outage mode and admission kind, open loop, a trace."""
    seen: set[str] = set()

    @settings(max_examples=300, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def census(data):
        scenario = repaired(data.draw(scenarios()), data.draw)
        assume(scenario is not None)
        tiers = [scenario.downstream, *scenario.services.values()]
        seen.add(f"tiers={len(tiers)}")
        seen.update(f"outage={o.mode}" for t in tiers for o in t.outages)
        seen.update(f"admission={t.admission.kind}" for t in tiers if t.admission)
        seen.update("hedged edge" for t in tiers for e in t.calls if e.hedging)
        seen.update("fan-out" for t in tiers for e in t.calls if e.count > 1)
        seen.update("cancel" for t in tiers for e in t.calls if e.cancel)
        seen.update(f"discipline={t.discipline}" for t in tiers)
        seen.add("open loop" if scenario.workers.count is None else "closed loop")
        seen.update(["trace"] if scenario.workload.trace else [])
        seen.update(["profile"] if scenario.workload.profile else [])
        seen.update(["autoscale"] if scenario.workers.autoscale else [])
        seen.update(["keys"] if scenario.workload.keys else [])
        seen.update(["preset"] if scenario.retry.preset else [])

    census()
    wanted = {"tiers=1", "tiers=4", "hedged edge", "fan-out", "cancel", "open loop",
              "closed loop", "trace", "profile", "autoscale", "keys", "preset",
              *(f"outage={m}" for m in ("down", "blackhole", "error", "slow")),
              *(f"admission={k}" for k in ("fixed", "aimd", "vegas", "gradient2", "envoy")),
              *(f"discipline={d}" for d in ("fifo", "lifo", "adaptive_lifo"))}
    assert wanted <= seen, sorted(wanted - seen)


HEDGED_GRAPH = {
    "name": "hedged", "seed": 1, "duration": "20s",
    "workload": {"rate": 200}, "workers": {"count": 100},
    "retry": {"strategy": "exponential", "base": "100ms", "max_retries": 3},
    "downstream": {"name": "gateway", "concurrency": 200,
                   "service": {"distribution": "exponential", "mean": "5ms"}, "timeout": "2s",
                   "calls": [{"service": "orders", "timeout": "800ms",
                              "hedging": {"delay": "50ms", "max_attempts": 2}}]},
    "services": {
        "orders": {"concurrency": 100, "service": {"distribution": "exponential",
                                                   "mean": "10ms"},
                   "calls": [{"service": "inventory", "timeout": "300ms"}]},
        "inventory": {"concurrency": 50, "service": {"distribution": "exponential",
                                                     "mean": "10ms"}}},
}


@pytest.mark.parametrize("mode", ["running", "waiting", "blackhole"])
def test_a_cancelled_call_ends_once_when_its_deadline_comes_after(mode):
    """A hedge cancels its losing copies; the deadline of a cancelled copy still comes
    later, and must not end it again (it crashed the run: the user's gateway -> orders
    (hedged) -> inventory). Here the losing copy is in service with calls of its own, in
    the waiting room, or hanging in a blackhole when it is cancelled."""
    doc = {**HEDGED_GRAPH, "services": {k: dict(v) for k, v in HEDGED_GRAPH["services"].items()}}
    if mode == "waiting":
        doc["services"]["orders"]["concurrency"] = 2
    if mode == "blackhole":
        doc["services"]["orders"]["outages"] = [{"start": "5s", "duration": "5s",
                                                 "mode": "blackhole"}]
    scenario = herdsim.load_scenario(doc)
    sim, res = run(scenario)
    assert_calls_counted_once(sim)
    orders = sim.tiers["orders"]
    assert len(orders.attempts) > res.summary["jobs_succeeded"]  # copies were sent
    assert np.all(np.diff(res.timeseries["time"]) > 0)

"""Defences by criticality class (``model/downstream/classed.py``): each rule call by call
against docs/policies.md (shedding and the admission limit refuse the lowest class at the
configured point and a higher one only beyond it; CoDel's drop falls on the lowest class
waiting), and in whole runs under overload: the lowest class succeeds least, one class
alone runs exactly as no classes, and every job ends in one place."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import simpy
from conftest import assert_every_job_ends_in_one_place, overloaded, tiny

import herdsim
from herdsim.config.loading import validate
from herdsim.config.sections import Downstream as DownstreamConfig
from herdsim.model.calls import OK, REJECTED, THROTTLED
from herdsim.model.downstream.defences import DefendedDownstream, downstream_type
from herdsim.model.recorder import Recorder
from herdsim.model.simulation import Simulation
from herdsim.model.streams import draws
from herdsim.policies.criticality import CLASSES, ClassedRoom, Mix

TOP, LOW = CLASSES.index("critical_plus"), CLASSES.index("sheddable")
EVEN = dict.fromkeys(CLASSES, 1)
MECHANISMS = {  # each alone beside an unbounded room (no push-out)
    "shedding": {"shedding": {"above": 10, "probability": 0.0}},
    "admission": {"admission": {"kind": "fixed", "limit": 20}},
    "aimd": {"admission": {"kind": "aimd", "initial_limit": 20}},
    "codel": {"codel": {"target": 0.05, "interval": 0.1}},
}


def downstream(mix=None, **down):
    """A downstream with defences by class (*mix*'s factors, its own room by class),
    one slot of 1 s, an unbounded room; built alone, on its own clock."""
    cfg = DownstreamConfig.model_validate({"concurrency": 1, "timeout": 10, **down})
    env = simpy.Environment()
    ds = downstream_type(cfg, classed=True)(
        env, cfg, draws(lambda n: np.ones(n)), draws(lambda n: np.ones(n)), Recorder(),
        draw=draws(lambda n: np.full(n, 0.5)))
    return env, ds, Mix(**(mix or EVEN)).factors()


def calls(env, ds, factors, classes, until=1e-9):
    """One caller per class in *classes*, in order at t = 0, as a worker calls (a fast
    failure, or the call's event and ``finish``); runs to *until*: what each heard, as
    (time, outcome), or None while it waits."""
    class_of: dict = {}
    ds.by_class(class_of.__getitem__, factors)
    ds._waiting = ClassedRoom(lambda c: class_of[c.proc])
    heard: list = [None] * len(classes)

    def caller(i, k):
        class_of[env.active_process] = k
        call = ds.call(env.active_process, 10)
        if call.__class__ is int:
            heard[i] = (env.now, call)
            return
        outcome = ds.finish(call, (yield call.event))
        heard[i] = (round(env.now, 9), outcome)

    for i, k in enumerate(classes):
        env.process(caller(i, k))
    env.run(until=until)
    return heard


def test_factors_count_the_classes_present_below():
    """1 + step × the classes present below: the lowest present gets 1; absent classes
    count for nothing (an absent class above counts those present below it)."""
    assert Mix(critical=1, sheddable=2).factors() == (2.0, 1.5, 1.5, 1.0)
    assert Mix(**EVEN, step=1).factors() == (4.0, 3.0, 2.0, 1.0)


def test_shedding_refuses_the_lowest_class_at_above_and_a_higher_one_beyond():
    """One slot, above 2, probability 0: three calls fill the slot and two places; then a
    SHEDDABLE call is shed (depth 2 ≥ 2) and a CRITICAL_PLUS one admitted (its threshold
    is ceil(2 × 2.5) = 5)."""
    env, ds, factors = downstream(shedding={"above": 2, "probability": 0.0})
    got = calls(env, ds, factors, [TOP, TOP, TOP, LOW, TOP])
    assert got == [None] * 3 + [(0.0, REJECTED), None]  # the others still there


def test_the_admission_limit_refuses_the_lowest_class_at_the_limit_and_a_higher_beyond():
    """A fixed limit of 2 (status 429): at 2 held a SHEDDABLE call is throttled, a
    CRITICAL_PLUS one admitted (up to 2 × 2.5 = 5 held)."""
    env, ds, factors = downstream(admission={"kind": "fixed", "limit": 2, "status": 429})
    got = calls(env, ds, factors, [TOP, TOP, LOW, TOP, TOP, TOP, TOP])
    assert got[2] == got[6] == (0.0, THROTTLED)  # the 6th TOP: 5 held
    assert got[:2] + got[3:6] == [None] * 5  # the others still there


def test_codel_rejects_the_lowest_class_waiting_and_serves_the_picked_call():
    """One slot of 1 s busy, two SHEDDABLE then a CRITICAL_PLUS call waiting: at 1 s (≫
    target 5 ms, the room standing ≫ 100 ms) the freed slot picks CRITICAL_PLUS (the
    highest class) and CoDel's drop falls on the newest SHEDDABLE, which hears 503;
    CRITICAL_PLUS is served (to 2 s). Then the older SHEDDABLE is picked, with no class
    below it: dropped itself, as without classes. (Without classes all three waiting
    calls are dropped, each picked after 1 s.)"""
    env, ds, factors = downstream(codel={})
    got = calls(env, ds, factors, [TOP, LOW, LOW, TOP], until=5)
    assert got == [(1.0, OK), (2.0, REJECTED), (1.0, REJECTED), (2.0, OK)]


def run(mix, limit=None, **down):
    """The overloaded run (conftest.overloaded) with *mix* and a room of *limit*."""
    return validate(overloaded(mix, limit, **down))


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_under_overload_the_lowest_class_succeeds_least(mechanism):
    """With each defence (and an unbounded room), success falls with the class, the
    mechanism refused calls, and every job is in one place at the end."""
    sim = Simulation(run(EVEN, **MECHANISMS[mechanism]))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    got = [res.summary["classes"][name]["succeeded_fraction"] for name in CLASSES]
    assert got[-1] < got[0]
    shed = {"shedding": "rejected", "admission": "rejected", "aimd": "rejected",
            "codel": "shed_codel"}[mechanism]
    assert res.timeseries[shed].sum() > 0


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_one_class_runs_exactly_as_no_classes(mechanism):
    """One class (the lowest: factor 1) beside each defence: the frames are those of the
    run without classes, bar the new columns."""
    down = MECHANISMS[mechanism]
    plain, one = herdsim.run(run(None, 20, **down)), herdsim.run(run({"sheddable": 1}, 20,
                                                                     **down))
    pd.testing.assert_frame_equal(plain.timeseries,
                                  one.timeseries.drop(columns=["shed_priority"]))
    pd.testing.assert_frame_equal(plain.jobs, one.jobs.drop(columns=["criticality"]))


@pytest.mark.parametrize("where", ["fleet", "graph"])
def test_a_fleets_replicas_and_a_graphs_top_tier_defend_by_class(where):
    """Shedding by class on each replica of a fleet, and on the workers' tier of a call
    graph: built by class, the lowest class succeeds least, every job in one place."""
    down = {"concurrency": 10, "timeout": 1.0, "shedding": {"above": 5, "probability": 0},
            "service": {"distribution": "exponential", "mean": 0.05}}
    extra = ({"downstream": {**down, "concurrency": 5, "replicas": 2}} if where == "fleet"
             else {"downstream": {**down, "calls": [{"service": "db"}]},
                   "services": {"db": {"concurrency": 50, "service": {
                       "distribution": "exponential", "mean": 0.01}}}})
    sim = Simulation(validate(tiny(duration=20, seed=5, workers={"count": 100},
                                   workload={"rate": 300, "criticality": EVEN},
                                   retry={"max_retries": 2}, **extra)))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    pools = getattr(sim.downstream, "replicas", [sim.downstream])
    assert all(hasattr(pool, "by_class") for pool in pools)
    got = [res.summary["classes"][name]["succeeded_fraction"] for name in CLASSES]
    assert got[-1] < got[0]


def test_without_classes_the_defences_are_the_plain_class():
    """A run without classes builds the defended downstream as it was (nothing by class
    is even there to call)."""
    sim = Simulation(run(None, **MECHANISMS["shedding"]))
    assert type(sim.downstream) is DefendedDownstream
    assert not hasattr(sim.downstream, "by_class")

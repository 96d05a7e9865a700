"""Criticality classes (``workload.criticality``, ``model/classes.py``): under overload
the lowest class succeeds least and the highest most; one class runs exactly as no
classes; the draws follow the mix; a call pushed out of the room is answered once; the
summary's ``classes`` agree with the jobs frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import assert_every_job_ends_in_one_place, overloaded, tiny

import herdsim
from herdsim.config.loading import validate
from herdsim.errors import ScenarioError
from herdsim.model.simulation import Simulation
from herdsim.outputs.reading import summary_problem

EVEN = {"critical_plus": 1, "critical": 1, "sheddable_plus": 1, "sheddable": 1}


def scenario(mix=None, limit=20, **down):
    """The overloaded run (conftest.overloaded) with *mix* and a room of *limit*."""
    return validate(overloaded(mix, limit, **down))


def shares(res):
    s = res.summary["classes"]
    return [s[name]["succeeded_fraction"] for name in EVEN]


def test_under_overload_the_lowest_class_succeeds_least():
    """Equal shares, a bounded room: the room serves the highest class first and a full
    room pushes out the lowest, so success falls with the class (SRE: shed the least
    critical first) and the highest class loses almost nothing."""
    sim = Simulation(scenario(EVEN))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    got = shares(res)
    assert got[-1] < got[0]
    assert all(a >= b for a, b in zip(got, got[1:], strict=False))
    assert got[0] > 0.95 and res.timeseries["shed_priority"].sum() > 0


def test_an_unbounded_room_still_serves_the_highest_class_first():
    """No queue_limit: nothing is pushed out; the low class waits longest (its p99)."""
    res = herdsim.run(scenario(EVEN, limit=None))
    s = res.summary["classes"]
    assert res.timeseries["shed_priority"].sum() == 0
    assert s["sheddable"]["latency_p99"] > s["critical_plus"]["latency_p99"]


def test_one_class_runs_exactly_as_no_classes():
    """The class draws come from their own stream, and with one class nothing is ever
    pushed out and the room is FIFO: the frames are the same, bar the new columns."""
    plain, one = herdsim.run(scenario()), herdsim.run(scenario({"sheddable": 1}))
    pd.testing.assert_frame_equal(plain.timeseries,
                                  one.timeseries.drop(columns=["shed_priority"]))
    pd.testing.assert_frame_equal(plain.jobs, one.jobs.drop(columns=["criticality"]))
    pd.testing.assert_frame_equal(plain.sleeps, one.sleeps)
    assert "classes" not in plain.summary and "criticality" not in plain.jobs


def test_the_classes_follow_the_mix_and_the_summary_the_jobs():
    """Shares 1:3 (no overload: 50 jobs/s): the draws are binomial, within 4 standard
    errors of 0.25; the summary's counts are the jobs frame's."""
    sc = validate(tiny(duration=20, workload={"rate": 50, "criticality": {
        "critical": 1, "sheddable": 3}}))
    res = herdsim.run(sc)
    jobs, s = res.jobs, res.summary["classes"]
    n = len(jobs)
    share = (jobs["criticality"] == "critical").mean()
    assert share == pytest.approx(0.25, abs=4 * np.sqrt(0.25 * 0.75 / n))
    assert set(s) == {"critical", "sheddable"}
    for name, row in s.items():
        mine = jobs[jobs["criticality"] == name]
        assert row["jobs"] == len(mine)
        assert row["succeeded"] == int((mine["outcome"] == "succeeded").sum())
    assert summary_problem(res.summary) is None


@pytest.mark.parametrize(("mix", "model", "expected"), [
    ({"critical": 0}, None, "a share above 0"),
    ({"critical": 1}, "broker", "has none"),
])
def test_refused(mix, model, expected):
    down = {"model": model} if model else {}
    with pytest.raises(ScenarioError, match=expected):
        validate(tiny(workload={"criticality": mix}, downstream=down))

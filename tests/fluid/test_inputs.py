"""The fluid model's grid inputs: arrivals (profile, trace) and outages, against direct
counts and the scenario's own integral."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tiny

from herdsim.config.loading import load_scenario
from herdsim.fluid import inputs
from herdsim.policies.arrivals.piecewise import Piecewise


def test_a_profiles_arrivals_integrate_to_its_jobs():
    data = tiny(duration="20s")
    data["workload"] = {"arrivals": "poisson", "profile": [
        {"at": "0s", "rate": 100}, {"at": "5s", "rate": 400, "ramp": "2s"},
        {"at": "12s", "rate": 50}], "spikes": [{"at": "15s", "duration": "1s", "rate": 900}]}
    sc = load_scenario(data)
    grid = inputs.build(sc, 0.002)
    assert grid.jobs.sum() == pytest.approx(Piecewise(sc.workload).integral(0, 20), rel=1e-9)


def test_a_traces_arrivals_are_its_times_counted_per_step(tmp_path):
    rng = np.random.default_rng(3)
    times = np.sort(rng.uniform(0, 12, 5000))  # some after the 10 s run: dropped
    (tmp_path / "t.csv").write_text("time\n" + "\n".join(f"{t:.6f}" for t in times) + "\n")
    data = tiny(duration="10s")
    data["workload"] = {"arrivals": "trace", "trace": {
        "file": str(tmp_path / "t.csv"), "time_scale": 0.5, "start": "1s"}}
    sc = load_scenario(data)
    grid = inputs.build(sc, 0.002)
    shifted = times * 0.5 + 1.0
    expected = np.histogram(shifted, bins=grid.n, range=(0, grid.n * 0.002))[0]
    assert np.abs(grid.jobs - expected).sum() <= 2  # a time on a step's edge may round over


def test_outages_come_from_their_members_bookkeeping():
    sc = load_scenario(tiny(duration="10s", downstream={"outages": [
        {"start": "1s", "duration": "2s", "mode": "down"},
        {"start": "2s", "duration": "4s", "mode": "slow", "factor": 3},
        {"start": "5s", "duration": "2s", "mode": "error", "error_rate": 0.5}]}))
    grid = inputs.build(sc, 0.01)
    at = lambda t: int(round(t / 0.01))  # noqa: E731
    assert grid.fail_all[at(1)] and grid.fail_all.sum() == 1
    assert grid.down[at(1):at(3)].all() and not grid.down[at(3):].any()
    assert grid.slow[at(2.5)] == 3 and grid.slow[at(6.5)] == 1
    assert grid.error_rate[at(5.5)] == 0.5 and grid.error_rate[at(4.5)] == 0

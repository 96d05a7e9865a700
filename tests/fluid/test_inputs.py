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


@pytest.mark.parametrize(("mode", "limit"), [("use", None), ("at_least", None),
                                             ("at_least", "500ms")])
def test_a_hint_reshapes_the_sleep_as_the_client_heeds_it(mode, limit):
    """Full jitter U(0, 4 s) after a 2 s Retry-After: ``use`` sleeps 2 s; ``at_least``
    max(pause, 2 s) (a mean of 2.5 s: half the pauses lengthened to 2 s); with a 0.5 s
    limit max(pause, min(2 s, pause + 0.5 s)) (mean 2.25 - 0.5^2/8 = 2.21875 s)."""
    retry = {"strategy": "full_jitter", "base": "4s", "cap": "4s", "max_retries": 1,
             "retry_after": mode}
    if limit:
        retry["retry_after_limit"] = limit
    sc = load_scenario(tiny(duration="10s", downstream={"retry_after": "2s"}, retry=retry))
    dt = 0.002
    kernel = inputs.build(sc, dt).hint_kernels[0]
    mean = float(((kernel.offset + np.arange(kernel.mass.size)) * dt * kernel.mass).sum())
    expected = {"use": 2.0, "at_least": 2.5}[mode] if limit is None else 2.21875
    assert mean == pytest.approx(expected, abs=2 * dt)
    if mode == "use":
        assert kernel.mass.size == 1 and kernel.offset == 1000


def test_a_rate_limit_serves_its_rate_and_refuses_the_rest():
    from herdsim.fluid.integrate import integrate

    data = tiny(duration="10s", workload={"arrivals": "constant", "rate": 300},
                workers={"count": 1000},
                downstream={"concurrency": 100, "rate_limit": {"rate": 200, "burst": 10},
                            "service": {"distribution": "exponential", "mean": "10ms"}},
                retry={"strategy": "fixed", "base": "1ms", "max_retries": 0})
    sc = load_scenario(data)
    grid = inputs.build(sc, 0.002)
    flows = integrate(sc, grid)
    late = slice(grid.n // 2, None)
    seconds = grid.n // 2 * 0.002
    assert flows.success[late].sum() / seconds == pytest.approx(200, rel=0.01)
    assert flows.rejected[late].sum() / seconds == pytest.approx(100, rel=0.01)

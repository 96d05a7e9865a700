"""The offered load on the timeline: flat only when the workload's rate holds."""

from __future__ import annotations

import types

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from conftest import tiny  # noqa: E402

import herdsim  # noqa: E402
from herdsim.plots import offered  # noqa: E402


def _drawn(doc: dict):
    scenario = herdsim.load_scenario(doc)
    res = herdsim.run(scenario)
    ts = res.timeseries.assign(arm="a", replication=0)
    c = types.SimpleNamespace(timeseries=ts, arms=[types.SimpleNamespace(label="a")])
    fig, ax = plt.subplots()
    text = offered.draw(ax, c, scenario, 0)
    ys = np.asarray(ax.lines[0].get_ydata(), dtype=float)
    plt.close(fig)
    return text, ys, res, scenario


def test_a_profile_is_drawn_as_the_jobs_arriving_not_its_first_rate():
    """A profile from 50 to 400 jobs/s: the dotted line read 'offered 50 jobs/s' all run
    long (the census's combined scenario); it is the arrivals per second, which reach the
    second step (Poisson: within a few standard deviations of 400 over the last second)."""
    text, ys, res, scenario = _drawn(tiny(duration="2s", workload={
        "rate": 50, "profile": [{"at": 0, "rate": 50}, {"at": "1s", "rate": 400}]}))
    assert "arriving" in text and "profile" in text
    assert np.allclose(ys, res.timeseries["arrivals"] / scenario.bin)
    late = res.timeseries["time"] >= 1.0
    assert abs(res.timeseries.loc[late, "arrivals"].sum() - 400) < 5 * 400 ** 0.5


def test_a_steady_rate_is_one_flat_line_at_it():
    text, ys, _, _ = _drawn(tiny(duration="1s", workload={"rate": 80}))
    assert "offered 80 jobs/s" in text
    assert set(ys) == {80.0}

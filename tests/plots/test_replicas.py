"""The timeline's replica strips (``plots/replicas.py``): one per arm of a fleet, a row
per replica, grey where a replica was out, and none for a run without replicas."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SCENARIOS

import herdsim
from herdsim.plots import replicas
from herdsim.plots.timeline import timeline


@pytest.fixture(scope="module")
def fleet():
    sc = herdsim.load_scenario(SCENARIOS / "fleet.yaml", {
        "duration": "40s", "downstream.outages.0.duration": "20s"})
    return herdsim.compare(sc, vary={"downstream.outlier_detection.max_ejection_percent":
                                     [0, 10]}, processes=1, progress=False)


def strips(fig):
    return [ax for ax in fig.axes if "to each replica" in ax.get_title(loc="left")]


def test_a_strip_per_arm_a_row_per_replica_grey_where_out(fleet):
    fig = timeline(fleet)
    found = strips(fig)
    assert len(found) == 2
    never, ejecting = found
    for ax in found:
        mesh = ax.collections[0]
        assert mesh.get_array().shape == (10, 40)  # replicas x bins
    assert "grey" not in never.get_title(loc="left")  # nothing is ejected at 0%
    assert "grey" in ejecting.get_title(loc="left")
    out = np.ma.getmaskarray(ejecting.collections[0].get_array())
    assert out[3].sum() >= 15 and out[[0, 1, 2, 4, 5, 6, 7, 8, 9]].sum() < out[3].sum()


def test_the_strips_share_one_scale(fleet):
    limits = {ax.collections[0].get_clim() for ax in strips(timeline(fleet))}
    assert len(limits) == 1
    top = limits.pop()[1]
    assert top == pytest.approx(replicas.peak(fleet, fleet.arms, 0))


def test_no_strip_without_replicas(make_scenario):
    c = herdsim.compare(herdsim.load_scenario(make_scenario()), ["full_jitter"],
                        processes=1, progress=False)
    assert not strips(timeline(c)) and replicas.strip_arms(c) == []


def test_a_services_fleet_gets_the_strip():
    """No replicas at the top, a service's fleet below: the strip is that service's,
    a row per replica, its rates its ``<service>_replica{i}_calls`` columns'."""
    from conftest import graph

    data = graph()
    data["services"]["db"].update(replicas=3, balancer={"kind": "round_robin"})
    c = herdsim.compare(herdsim.load_scenario(data), ["full_jitter"], processes=1,
                        progress=False)
    (ax,) = strips(timeline(c))
    assert "of db" in ax.get_title(loc="left")
    rates = ax.collections[0].get_array()
    assert rates.shape[0] == 3
    ts = c.timeseries
    expected = sum(ts[f"db_replica{i}_calls"].sum() for i in range(3)) / c.scenario.bin
    assert float(rates.sum()) == pytest.approx(expected)

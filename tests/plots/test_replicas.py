"""The timeline's replica strips (``plots/replicas.py``): one per arm of a fleet, a row
per replica, grey where a replica was out, and none for a run without replicas."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SCENARIOS

import herdsim
from herdsim.plots import replicas, style
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


def test_an_outage_of_one_replica_is_hatched_not_the_whole_tiers_grey(fleet):
    """The fleet stays up while replica 3 is out: every panel hatches its window and the
    caption says which replica; an outage of the whole tier stays grey and is named so."""
    fig = timeline(fleet)
    spans = [p for ax in fig.axes for p in ax.patches if p.get_hatch()]
    assert spans and all(p.get_hatch() == "//" for p in spans)
    text = " ".join(fig._suptitle.get_text().split())  # as read, line breaks aside
    assert "hatched: replica 3 out" in text and "grey: outage" not in text
    whole = herdsim.load_scenario(SCENARIOS / "fleet.yaml", {
        "duration": "40s", "downstream.outages.0.duration": "20s",
        "downstream.outages.0.replica": None})
    assert style.outage_key(whole) == "; grey: outage"
    both = whole.model_copy(update={"downstream": whole.downstream.model_copy(update={
        "outages": [*whole.downstream.outages, *fleet.arms[0].scenario.downstream.outages]})})
    assert style.outage_key(both) == "; grey: outage; hatched: replica 3 out"

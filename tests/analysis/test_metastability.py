"""Metastability: the classification rule, the KPIs it reads, the cells and the map.

Budget: about 5 s (a 16-task sweep of 3 s runs, two 60 s runs of the bundled scenario,
drawing two maps).
"""

from __future__ import annotations

import math

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import tiny
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.patches import Rectangle

from herdsim import load_scenario, run
from herdsim.analysis import metastability as ms
from herdsim.errors import SweepError
from herdsim.experiments.sweep import plan, run_sweep
from herdsim.outputs import sweep_dir as sweep_dir_kind
from herdsim.plots import metastability_map

STRATEGIES = ["exponential", "full_jitter"]


def runs(*rows: dict) -> pd.DataFrame:
    """Sweep rows with the columns the rule reads; defaults: 50% load, a 2 s outage."""
    defaults = {"recovery_time": None, "collapses_after_outage": 0, "goodput_tail": 1.0,
                "load": 0.5, "outage_seconds": 2.0}
    return pd.DataFrame([{**defaults, **row} for row in rows])


# --- the rule ----------------------------------------------------------------------------

@given(rate=st.floats(1, 1e4), headroom=st.floats(1.01, 10), outage=st.floats(0.01, 100))
def test_ideal_drain_is_the_fluid_queue_drain_time(rate, headroom, outage):
    """A backlog of rate x outage jobs drains at capacity - rate jobs per second."""
    capacity = rate * headroom
    expected = rate * outage / (capacity - rate)
    assert ms.ideal_drain(rate / capacity, outage) == pytest.approx(expected, rel=1e-9)


def test_ideal_drain_edges():
    assert ms.ideal_drain(0.9, 0.0) == 0.0  # no outage, no backlog
    assert ms.ideal_drain(1.0, 1.0) == math.inf  # a saturated queue never drains
    assert ms.ideal_drain(1.5, 1.0) == math.inf


def test_recovered_within_the_limit_degraded_beyond():
    """At 50% load a 2 s outage drains ideally in 2 s: the limit is max(5 s, 4 s) = 5 s;
    at 80% load an 8 s outage drains in 32 s: the limit is 64 s."""
    table = runs({"recovery_time": 5.0}, {"recovery_time": 5.01},
                 {"recovery_time": 64.0, "load": 0.8, "outage_seconds": 8.0},
                 {"recovery_time": 64.1, "load": 0.8, "outage_seconds": 8.0})
    assert list(ms.classify(table)) == ["recovered", "degraded", "recovered", "degraded"]


def test_recovered_slowly_is_degraded_even_after_a_collapse():
    """A run that is healthy for good at the end is not metastable, whatever happened."""
    table = runs({"recovery_time": 30.0, "collapses_after_outage": 3, "goodput_tail": 0.1})
    assert list(ms.classify(table)) == ["degraded"]


@pytest.mark.parametrize("collapses, goodput, expected", [
    (1, 1.2, "metastable"),  # knocked over again after the trigger ended
    (0, 0.49, "metastable"),  # stays down without a new crash
    (0, None, "metastable"),  # no tail to measure: nothing shows it serving
    (0, 0.5, "degraded"),  # serving, no new crash: still draining its backlog
    (0, 1.3, "degraded"),
])
def test_never_recovered(collapses, goodput, expected):
    table = runs({"collapses_after_outage": collapses, "goodput_tail": goodput})
    assert list(ms.classify(table)) == [expected]


def test_a_cell_takes_the_majority_class_and_ties_go_to_the_worse():
    table = runs(
        {"strategy": "a", "x": 1, "recovery_time": 1.0},
        {"strategy": "a", "x": 1, "recovery_time": 3.0},
        {"strategy": "a", "x": 1, "collapses_after_outage": 2},
        {"strategy": "a", "x": 2, "recovery_time": 1.0},
        {"strategy": "a", "x": 2, "collapses_after_outage": 1},
    )
    cells = ms.cells(table, ["x"]).set_index("x")
    assert cells.loc[1, "class"] == "recovered" and cells.loc[1, "agree"] == 2
    assert cells.loc[1, "recovery_time"] == 2.0  # median over the runs that recovered
    assert cells.loc[2, "class"] == "metastable" and cells.loc[2, "runs"] == 2


# --- the KPIs read off a run -------------------------------------------------------------

def test_steady_run_serves_what_arrives():
    """Constant arrivals at 25% load, no outage: over the last second the successes equal
    the arrivals give or take the 4 calls in service and one arrival at each edge, so
    goodput_tail is within (4 + 2) / 50 of 1."""
    sc = load_scenario(tiny(duration="10s", workload={"arrivals": "constant", "rate": 50}))
    kpis = ms.run_kpis(run(sc))
    assert kpis["goodput_tail"] == pytest.approx(1.0, abs=6 / 50)
    assert kpis["load"] == pytest.approx(50 / sc.downstream.capacity_rate())
    assert kpis["outage_seconds"] == 0.0


def test_outage_seconds_add_up_and_the_tail_starts_after_the_last_outage():
    outages = [{"start": "1s", "duration": "500ms"}, {"start": "3s", "duration": "1s"}]
    sc = load_scenario(tiny(duration="4s", downstream={"outages": outages}))
    kpis = ms.run_kpis(run(sc))
    assert kpis["outage_seconds"] == pytest.approx(1.5)
    assert kpis["goodput_tail"] is None  # the last outage lasts until the end


def test_the_bundled_scenario_separates_the_strategies(scenarios_dir):
    """scenarios/metastable_sweep.yaml's claim: at 60% load after a 2 s outage exponential
    backoff keeps knocking the downstream over, full jitter recovers."""
    classes = {}
    for strategy in STRATEGIES:
        sc = load_scenario(scenarios_dir / "metastable_sweep.yaml", {
            "workload.rate": 600, "downstream.outages.0.duration": "2s",
            "retry.strategy": strategy})
        result = run(sc)
        row = pd.DataFrame([{**result.summary, **ms.run_kpis(result)}])
        classes[strategy] = ms.classify(row).iloc[0]
    assert classes == {"exponential": "metastable", "full_jitter": "recovered"}


# --- the map -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A finished 3 x 2 sweep (x 2 strategies) of 3 s runs, one axis of them the load."""
    folder = tmp_path_factory.mktemp("map")
    data = tiny(duration="3s", downstream={"outages": [{"start": "1s", "duration": "200ms"}]})
    (folder / "tiny.yaml").write_text(yaml.safe_dump(data))
    sweep = plan(folder / "tiny.yaml", ["downstream.outages.0.duration=100ms:400ms:3",
                                        "workload.rate=40,80"], STRATEGIES)
    return run_sweep(sweep, folder / "sweep", processes=1, progress=False)


def draw_map(directory, **axes):
    """The map of a finished sweep directory, as ``herdsim plot`` draws it."""
    return metastability_map.plot_map(*sweep_dir_kind.load_sweep(directory), **axes)


def test_map_has_a_panel_per_strategy_and_a_cell_per_grid_point(sweep_dir):
    figure = draw_map(sweep_dir)
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == STRATEGIES
    table = ms.cells(pd.read_parquet(sweep_dir / "sweep.parquet"),
                     ["downstream.outages.0.duration", "workload.rate"])
    for ax, strategy in zip(panels, STRATEGIES, strict=True):
        cells = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert len(cells) == 6 and len(ax.texts) == 6
        colours = sorted(mcolors.to_hex(p.get_facecolor()) for p in cells)
        classes = table.loc[table["strategy"] == strategy, "class"]
        expected = classes.map(metastability_map.COLORS).str.lower()
        assert colours == sorted(expected)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["100ms", "250ms", "400ms"]
    loads = [t.get_text() for t in panels[0].get_yticklabels()]
    assert loads[0].startswith("40 (") and loads[0].endswith("%)")


def test_map_is_written_as_files(sweep_dir):
    written = sweep_dir_kind.save_map(sweep_dir, ["png", "svg"])
    assert [p.name for p in written] == ["map.png", "map.svg"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(sweep_dir.glob(".map-*"))


def test_class_counts_cover_every_cell(sweep_dir):
    counts = sweep_dir_kind.class_counts(sweep_dir)
    assert list(counts.index) == STRATEGIES and list(counts.columns) == list(ms.CLASSES)
    assert (counts.sum(axis=1) == 6).all()


def test_map_needs_two_different_swept_axes(sweep_dir):
    with pytest.raises(SweepError, match="not a swept field"):
        draw_map(sweep_dir, x="workers.count")
    with pytest.raises(SweepError, match="the same field"):
        draw_map(sweep_dir, x="workload.rate", y="workload.rate")
    with pytest.raises(SweepError, match="also swept: downstream.outages.0.duration"):
        draw_map(sweep_dir, x="workload.rate")


def test_one_axis_map_has_one_row(sweep_dir, tmp_path):
    sweep = plan(sweep_dir / "scenario.yaml", ["workload.rate=40,80"], ["full_jitter"])
    figure = draw_map(run_sweep(sweep, tmp_path / "one", processes=1, progress=False))
    (panel,) = [ax for ax in figure.axes if ax.get_title()]
    assert len([p for p in panel.patches if isinstance(p, Rectangle)]) == 2
    assert np.allclose(panel.get_ylim(), (-0.5, 0.5))


def test_back_to_a_state_that_never_served_the_load_is_not_recovered():
    """An admission limit far below what the load needs refuses most jobs from t = 0: the
    run returns to its pre-outage success rate at once, but that rate is a fifth of the
    offered jobs. Recovered means serving them again, so it is degraded (the rule's
    GOODPUT_FLOOR), and a limit that carries the load is still recovered."""
    def state(limit: int) -> tuple[str, float]:
        res = run(load_scenario(tiny(
            duration="20s", workload={"rate": 100}, workers={"count": 50},
            downstream={"concurrency": 20, "service": {"mean": "100ms"},
                        "admission": {"kind": "fixed", "limit": limit},
                        "outages": [{"start": "5s", "duration": "1s", "mode": "down"}]},
            retry={"strategy": "full_jitter", "max_retries": 2})))
        return res.summary["state"], res.summary["succeeded_fraction"]

    starved, share = state(2)  # 2 in flight x 10/s = 20 jobs/s of the 100 offered
    assert share < ms.GOODPUT_FLOOR and starved == "degraded"
    assert state(40)[0] == "recovered"

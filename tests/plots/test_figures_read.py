"""Comparison figures a reviewer can read at 2 to 12 arms: a colour per arm, short labels
for varied settings, every calls row on one scale with its peak labelled, names never over
the peaks, the KPI bars in the timeline's order, each tier's down periods, sleep bins no
atom sits on, and a sweep map that states its rule."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_figures_fit import assert_texts_apart_on_the_canvas

import herdsim
from herdsim.analysis import metastability as ms
from herdsim.analysis.theory import binned, expected_counts, sleep_prev
from herdsim.config import bundled
from herdsim.outputs.compare_dir import load_outputs
from herdsim.plots import describe, metastability_map
from herdsim.plots.sleeps import sleep_edges
from herdsim.plots.style import MIN_DELTA_E, arm_styles, delta_e
from herdsim.plots.timeline import LOG_RATIO, call_counts, tier_downs

STRATEGIES = ["fixed", "exponential", "full_jitter"]


def _story(make_scenario, **changes):
    """The outage story at a hundredth of its size: 4 s, 30 workers, a 1 s outage at 1 s,
    a crash rule, a waiting room."""
    return herdsim.load_scenario(make_scenario(**{
        "duration": "4s", "workload": {"rate": 70}, "workers": {"count": 30},
        "downstream": {"concurrency": 20, "queue_limit": 10,
                       "service": {"distribution": "exponential", "mean": "200ms"},
                       "timeout": "2s", "outages": [{"start": "1s", "duration": "1s"}],
                       "overload": {"collapse": {"window": "100ms", "threshold": 15,
                                                 "restart_time": "500ms"}}}, **changes}))


@pytest.fixture(scope="module")
def twelve(make_scenario):
    """3 strategies x 2 retry limits x DLQ on and off: 12 arms, 4 of each strategy."""
    return herdsim.compare(_story(make_scenario), STRATEGIES,
                           vary={"retry.max_retries": [1, 2], "dlq.enabled": [True, False]},
                           processes=1, progress=False)


@pytest.fixture(scope="module")
def two(make_scenario):
    return herdsim.compare(_story(make_scenario), ["exponential", "full_jitter"],
                           processes=1, progress=False)


def _rows(c, figure):
    """The timeline's calls rows, one per arm, top first."""
    return figure.axes[:len(c.arms)]


def test_twelve_arms_of_four_per_strategy_get_twelve_colours(twelve):
    styles = arm_styles(twelve.arms)
    colours = [styles[arm.label]["color"] for arm in twelve.arms]
    assert len(colours) == 12
    assert min(delta_e(a, b) for a, b in itertools.combinations(colours, 2)) >= MIN_DELTA_E


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["timeline", "landing", "sleeps", "kpis"])
def test_twelve_arms_draw_no_text_over_another_nor_off_the_canvas(twelve, kind):
    """As test_figures_fit's check at 4 and 10 arms: every text's rendered box (titles,
    legends, tick labels) on the canvas, and no two overlapping."""
    assert_texts_apart_on_the_canvas(twelve.plot(kind))


def test_varied_arms_are_labelled_by_their_values_and_the_heading_names_the_paths(twelve):
    """``fixed · 1 · true``: the policy (it differs between arms), then each varied value in
    the heading's order; the heading names each varied path once."""
    names = describe.short_labels(twelve.arms)
    for arm in twelve.arms:
        retries, dlq = arm.settings["retry.max_retries"], arm.settings["dlq.enabled"]
        assert names[arm.label] == f"{arm.strategy} · {retries} · {str(dlq).lower()}"
    figure = twelve.plot("timeline")
    title = figure._suptitle.get_text()
    assert "labelled retry strategy · retry.max_retries · dlq.enabled" in title
    assert [ax.get_title("left") for ax in _rows(twelve, figure)] \
        == [names[arm.label] for arm in twelve.arms]


@pytest.mark.parametrize("arms", ["two", "twelve"])
def test_calls_rows_share_one_scale_and_label_their_own_peak(request, arms):
    """Every calls row has the same y limits, so a spike compares across arms at a glance;
    the scale is logarithmic exactly when the highest peak is over LOG_RATIO times the
    lowest; each row's right title and tick name its own peak."""
    c = request.getfixturevalue(arms)
    figure = c.plot("timeline")
    rows = _rows(c, figure)
    assert len({ax.get_ylim() for ax in rows}) == 1
    peaks = [call_counts(c, arm)[1].max() for arm in c.arms]
    positive = [p for p in peaks if p > 0]
    log = max(positive) / min(positive) > LOG_RATIO
    assert {ax.get_yscale() for ax in rows} == {"log" if log else "linear"}
    assert rows[0].get_ylim()[1] >= max(peaks)
    for ax, peak in zip(rows, peaks, strict=True):
        assert f"peak {peak:,.0f} calls" in ax.get_title("right")
        assert peak in ax.get_yticks()


def test_a_spike_twenty_times_another_arms_is_drawn_twenty_times_higher(two):
    """Exponential's cohort against full jitter's spread on a linear shared scale: the
    rows' drawn heights keep the peaks' ratio (the thing the per-row scale lost)."""
    figure = two.plot("timeline")
    rows = _rows(two, figure)
    tops = [max(np.max(line.get_ydata()) for line in ax.lines if line.get_linestyle() == "-")
            for ax in rows]
    peaks = [call_counts(two, arm)[1].max() for arm in two.arms]
    assert tops == pytest.approx(peaks)
    assert rows[0].get_ylim() == rows[1].get_ylim()


def _texts(figure):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure).draw()
    return figure.canvas.get_renderer()


def _relabelled(c, label: str):
    """*c* with every arm's label (and its frames' ``arm``) replaced by a long one."""
    mapping = {arm.label: f"{arm.label} {label}" for arm in c.arms}

    def frame(f):
        return None if f is None else f.assign(arm=f["arm"].map(mapping))

    return dataclasses.replace(
        c, arms=[dataclasses.replace(a, label=mapping[a.label]) for a in c.arms],
        runs=frame(c.runs), timeseries=frame(c.timeseries), sleeps=frame(c.sleeps),
        peaks=frame(c.peaks))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["timeline", "landing"])
def test_an_arm_name_never_runs_into_its_peak_label(two, kind):
    """Arm names far too long for a row are cut short with an ellipsis before the row's
    peak label: the two titles of each row do not overlap, and both lie on the canvas."""
    c = _relabelled(two, "with a name of " + "very " * 40 + "many words")
    figure = c.plot(kind)
    renderer = _texts(figure)
    width, height = figure.canvas.get_width_height()
    for ax in figure.axes[:len(c.arms)]:
        left, right = ax._left_title, ax._right_title
        assert left.get_text().endswith("…")
        a, b = left.get_window_extent(renderer), right.get_window_extent(renderer)
        assert a.x1 < b.x0, (left.get_text(), right.get_text())
        assert a.x0 >= 0 and b.x1 <= width and a.y0 >= 0 and a.y1 <= height


def test_the_kpi_bars_are_in_the_timelines_order(twelve):
    """Top to bottom, the KPI figure's arms are the timeline's rows, not a ranking."""
    names = describe.short_labels(twelve.arms)
    assert list(twelve.ranked()["arm"]) != [arm.label for arm in twelve.arms]  # would differ
    ticks = [t.get_text() for t in twelve.plot("kpis").axes[0].get_yticklabels()]
    rows = [ax.get_title("left") for ax in _rows(twelve, twelve.plot("timeline"))]
    assert ticks == rows == [names[arm.label] for arm in twelve.arms]


def test_presets_say_what_varies(make_scenario):
    """Arms of --presets vary the preset (not "retry strategy x retry.preset"); a run of
    one preset is titled by it, not by the strategy the preset sets."""
    sc = _story(make_scenario)
    arms = [SimpleNamespace(label=name, strategy="x", settings={"retry.preset": name},
                            scenario=sc) for name in ("sidekiq", "celery")]
    assert describe.arms_text(arms) == "2 arms varying the retry preset"
    stacks = herdsim.load_scenario(bundled.path("stacks"),
                                   {"retry.preset": "k8s-workqueue"})
    one = SimpleNamespace(label="exponential", strategy=stacks.retry.strategy, settings={},
                          scenario=stacks)
    assert describe.arms_text([one]) == "preset k8s-workqueue"
    assert describe.short_labels([one]) == {"exponential": "k8s-workqueue"}
    changed = herdsim.load_scenario(bundled.path("stacks"), {
        "retry.preset": "k8s-workqueue", "retry.strategy": "full_jitter"})
    assert describe.arms_text([SimpleNamespace(**{**vars(one), "scenario": changed})]) \
        == "preset k8s-workqueue, full_jitter"


def test_a_presets_comparison_varies_the_preset(make_scenario):
    c = herdsim.compare(_story(make_scenario, duration="3s"), presets=["sidekiq", "celery"],
                        processes=1, progress=False)
    assert c.varied == "retry preset"
    assert "2 arms varying the retry preset" in c.plot("kpis")._suptitle.get_text()


# --- a call graph's tiers: crashes and down periods ---------------------------------------

def _graph(**db) -> dict:
    """Workers -> front -> db; db goes down for 1 s at 1 s and crashes when more than 30
    calls land within 100 ms (for 500 ms): the retries after the outage knock it over."""
    return {
        "name": "graph", "duration": "6s", "seed": 3, "workload": {"rate": 300},
        "workers": {"count": 100},
        "retry": {"strategy": "exponential", "base": "100ms", "max_retries": 3},
        "downstream": {"name": "front", "concurrency": 200, "service": {"mean": "2ms"},
                       "timeout": "1s",
                       "calls": [{"service": "db", "timeout": "300ms",
                                  "retry": {"strategy": "exponential", "base": "50ms",
                                            "max_retries": 2}}]},
        "services": {"db": {"concurrency": 20, "service": {"mean": "20ms"},
                            "outages": [{"start": "1s", "duration": "1s"}],
                            "overload": {"collapse": {"window": "100ms", "threshold": 30,
                                                      "restart_time": "500ms"}}, **db}},
    }


@pytest.mark.slow
def test_a_lower_tiers_crashes_and_down_outage_are_drawn_per_arm(tmp_path):
    """Every crash the run counted for db is a 500 ms bar in db's down panel, beside its
    down outage, and the saved directory draws the same bars again."""
    c = herdsim.compare(herdsim.load_scenario(_graph()), ["exponential", "full_jitter"],
                        processes=1, progress=False)
    crashes = c.runs.set_index("arm")["tiers.db.collapses"]
    assert crashes.sum() > 0  # the case: db crashes after its outage
    downs = tier_downs(c)
    assert list(downs) == ["db"]
    for arm in c.arms:
        spans = downs["db"][arm.label]
        assert spans.count((1.0, 1.0)) == 1  # the down outage
        assert sum(1 for _, length in spans if length == 0.5) == crashes[arm.label]
    figure = c.plot("timeline")
    (panel,) = [ax for ax in figure.axes if ax.get_title("left").startswith("db down")]
    drawn = sum(len(coll.get_paths()) for coll in panel.collections)
    assert drawn == sum(len(spans) for spans in downs["db"].values())
    back = load_outputs(herdsim.save(c, tmp_path / "cmp", formats=[]))
    assert tier_downs(back) == downs


def test_a_single_tier_run_writes_no_crash_file(tmp_path, make_scenario):
    out = herdsim.save(herdsim.run(_story(make_scenario, duration="3s")), tmp_path / "run",
                       formats=[])
    assert not (out / "crashes.csv").exists()
    assert load_outputs(out).crashes is None


# --- sleep histograms ---------------------------------------------------------------------

@pytest.mark.slow
@given(strategy=st.sampled_from(["fixed", "exponential"]),
       base=st.floats(0.001, 10.0), cap_factor=st.floats(1.0, 2000.0),
       retries=st.integers(1, 12))
@settings(max_examples=200, deadline=None)
def test_no_atom_of_a_deterministic_strategy_sits_on_a_bin_edge(make_scenario, strategy, base,
                                                               cap_factor, retries):
    """Fixed and exponential backoff (with any cap) draw only atoms, base·2^k and the cap:
    none lies within a millionth of a bin of an edge, and the theory overlay over the same
    edges (cdf differences) equals the histogram exactly."""
    sc = herdsim.load_scenario(make_scenario(retry={
        "strategy": strategy, "base": base, "cap": base * cap_factor, "max_retries": retries}))
    built = sc.retry.build()
    rng = np.random.default_rng(0)
    rows = [{"replication": 0, "job": job, "time": float(attempt), "attempt": attempt,
             "sleep": float(built.sleep(attempt, 0.0, rng))}
            for job in range(3) for attempt in range(retries)]
    sleeps = pd.DataFrame(rows)
    edges = sleep_edges(sleeps["sleep"])
    width = edges[1] - edges[0]
    gaps = np.abs(sleeps["sleep"].to_numpy()[:, None] - edges[None, :])
    assert gaps.min() > 1e-6 * width
    ordered = sleep_prev(sleeps, base)
    shown = sleeps["sleep"] <= edges[-1]
    assert binned(sleeps["sleep"].to_numpy(), edges).sum() == shown.sum()
    np.testing.assert_array_equal(expected_counts(built, ordered, edges),
                                  binned(ordered["sleep"].to_numpy(), edges))


def test_continuous_sleeps_keep_bins_from_zero():
    """Without atoms (a jittered strategy repeats no value) the bins start at 0."""
    sleeps = pd.Series(np.random.default_rng(1).uniform(0, 3, 1000))
    assert sleep_edges(sleeps)[0] == 0.0


# --- the sweep map ------------------------------------------------------------------------

def test_map_states_its_rule_and_labels_cells_as_the_docs_do():
    """The title states the rule with the module's own constants; a cell with no recovery
    reads ``never`` (metastable) or ``not yet`` (still draining), as docs/scaling.md says,
    and every cell names the limit its class was judged against."""
    runs = pd.DataFrame([
        {"strategy": "a", "x": 1, "recovery_time": 5.7, "collapses_after_outage": 0,
         "goodput_tail": 1.0, "load": 0.3, "outage_seconds": 4.0},
        {"strategy": "a", "x": 2, "recovery_time": None, "collapses_after_outage": 2,
         "goodput_tail": 0.1, "load": 0.9, "outage_seconds": 4.0},
        {"strategy": "a", "x": 3, "recovery_time": None, "collapses_after_outage": 0,
         "goodput_tail": 0.9, "load": 0.9, "outage_seconds": 16.0},
    ])
    manifest = {"axes": [{"path": "x", "values": [1, 2, 3]}], "strategies": ["a"],
                "replications": 1, "scenario": {"name": "s"}}
    figure = metastability_map.plot_map(runs, manifest)
    title = figure._suptitle.get_text().replace("\n", " ")
    assert f"max({ms.SLOW_FLOOR:g} s, {ms.SLOW_FACTOR:g} × ideal drain)" in title
    assert "d·ρ/(1−ρ)" in title and f"{ms.GOODPUT_FLOOR:.0%}" in title
    labels = [t.get_text() for t in figure.axes[0].texts]
    limits = ms.slow_limits(runs)
    assert labels == [f"5.7 s\nlimit {limits[0]:.3g} s", f"never\nlimit {limits[1]:.3g} s",
                      f"not yet\nlimit {limits[2]:.3g} s"]
    assert list(ms.classify(runs)) == ["degraded", "metastable", "degraded"]
    docs = (Path(__file__).parents[2] / "docs" / "scaling.md").read_text()
    assert "`never`" in docs and "`not yet`" in docs

"""Figures that fit the scenario: the landing picture against theory, only panels with
something to show, titles that say what was changed, labels off the data, 16:9."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config import bundled
from herdsim.outputs.compare_dir import load_outputs
from herdsim.plots import describe
from herdsim.plots.landing import RESOLUTION, landing_counts, landings
from herdsim.plots.style import (
    MIN_DELTA_E,
    STRATEGY_COLORS,
    arm_colors,
    arm_styles,
    delta_e,
    lab,
)
from herdsim.policies.presets import PRESETS


def _title(figure) -> str:
    return figure._suptitle.get_text()


def _panel_titles(figure) -> str:
    return " | ".join(t for ax in figure.axes
                      for t in (ax.get_title("left"), ax.get_title("right")) if t)


@pytest.fixture(scope="module")
def cohort(make_scenario):
    """400 workers, every call in flight failing at t = 1 s; one retry 1 s later."""
    sc = herdsim.load_scenario(make_scenario(
        duration="4s", workload={"rate": 2000}, workers={"count": 400},
        downstream={"concurrency": 400, "service": {"distribution": "constant", "mean": "150ms"},
                    "outages": [{"start": "1s", "duration": "100ms"}]},
        retry={"base": "1s", "cap": "1s", "max_retries": 1}))
    return herdsim.compare(sc, ["fixed", "full_jitter"], processes=1, progress=False)


def test_landing_of_a_synchronised_cohort_is_a_delta(cohort):
    """Fixed backoff: every sleep drawn at the outage's start lands in one 10 ms bin, 1 s
    later. Full jitter draws U(0, 1 s): a cohort of N puts about N/100 in each 10 ms bin, so
    its busiest bin holds a few times that at most (a generous 5x covers the Poisson
    maximum over 100 bins for N in the hundreds)."""
    peaks = {}
    for arm in cohort.arms:
        sleeps = cohort.sleeps[cohort.sleeps["arm"] == arm.label]
        at_t0 = sleeps[np.isclose(sleeps["time"], 1.0)]
        assert len(at_t0) >= 300  # the cohort: calls in flight when the outage began
        edges, counts = landing_counts(landings(sleeps), 0.0, 4.0)
        assert counts.sum() == ((sleeps["time"] + sleeps["sleep"]) < 4.0).sum()
        peaks[arm.label] = (counts, edges, len(at_t0))
    counts, edges, n = peaks["fixed"]
    assert counts[int(round(2.0 / RESOLUTION))] >= n  # the delta at 1 s + 1 s
    counts, _, n = peaks["full_jitter"]
    assert counts.max() <= 5 * n / 100 + 10
    assert peaks["fixed"][0].max() >= 5 * counts.max()


def test_landing_figure_is_16_9_with_labels_off_the_data(cohort):
    figure = cohort.plot("landing")
    width, height = figure.get_size_inches()
    assert width / height == pytest.approx(16 / 9)
    assert all(not ax.texts for ax in figure.axes)  # labels are titles, outside the axes
    titles = _panel_titles(figure)
    # the headline is the first landing after the outage ends (1.1 s), not the busiest
    # 10 ms anywhere: fixed's cohort drawn at 1 s lands at 2 s, +0.90 s after the end
    assert "first landing after the outage" in titles and "per 10 ms" in titles
    assert "at +0.90 s" in titles.split(" | ")[1]
    assert "time since the outage ended at 1.1s" in figure.axes[len(cohort.arms) - 1] \
        .get_xlabel()


def test_timeline_panels_are_the_ones_with_something_to_show(make_scenario):
    """Open loop without outage: no backlog, no 'downstream down', no 'after the outage';
    the successes panel is always there."""
    sc = herdsim.load_scenario(make_scenario(workers={"count": None}, duration="1s"))
    figure = herdsim.run(sc).plot("timeline")
    titles, title = _panel_titles(figure), _title(figure)
    assert "succeeding per second" in titles
    assert "backlog" not in titles and "Downstream down" not in titles
    assert "after the outage" not in title and "no outage" in title
    assert all(not ax.texts for ax in figure.axes)
    width, height = figure.get_size_inches()
    assert width / height == pytest.approx(16 / 9)


def test_timeline_of_a_closed_loop_outage_shows_backlog_and_state(cohort):
    titles = _panel_titles(cohort.plot("timeline"))
    assert "backlog" in titles and "Downstream down" in titles and "Retry sleeps" in titles


def test_axis_is_cropped_to_activity(make_scenario):
    """100 occ clients are done within a second: a 60 s run shows a few seconds."""
    sc = herdsim.load_scenario(make_scenario(duration="60s", workers={"count": 20},
                                             downstream={"model": "occ"}))
    figure = herdsim.run(sc).plot("timeline")
    assert figure.axes[0].get_xlim()[1] < 10


def test_an_unbounded_downstream_draws_no_capacity(make_scenario):
    """capacity 100,000 calls/s against ~50 calls/s: no capacity line, no 100k axis."""
    sc = herdsim.load_scenario(make_scenario(
        workers={"count": None}, downstream={"concurrency": 2000}))
    assert sc.downstream.capacity_rate() > 50_000
    figure = herdsim.run(sc).plot("timeline")
    assert "capacity" not in _panel_titles(figure)
    assert figure.axes[0].get_ylim()[1] < 10_000


def test_dlq_on_and_off_do_not_look_the_same(make_scenario):
    titles = {flag: _title(herdsim.run(herdsim.load_scenario(
        make_scenario(dlq={"enabled": flag}, duration="1s"))).plot("timeline"))
        for flag in (True, False)}
    assert "DLQ on" in titles[True] and "DLQ off" in titles[False]


def test_set_overrides_reach_the_title_of_a_bundled_scenario():
    """What --set changed, against the bundled file of the same name, is in the heading."""
    sc = herdsim.load_scenario(bundled.path("poison"), {"dlq.enabled": "false"})
    assert describe.overrides(sc) == ["dlq.enabled=false"]
    assert describe.overrides(herdsim.load_scenario(bundled.path("poison"))) == []
    fake = SimpleNamespace(scenario=sc, arms=[SimpleNamespace(label="exponential", settings={},
                                                              scenario=sc)],
                           replications=1, varied="one arm")
    assert "dlq.enabled=false" in describe.heading(fake, "x")


def test_set_overrides_travel_with_the_output_directory(tmp_path):
    """The heading names what --set changed from the scenario itself, not from a bundled
    file reloaded at drawing time: a redraw from the folder names the same changes, and a
    scenario loaded without --set names none, whatever its name."""
    sc = herdsim.load_scenario(bundled.path("poison"),
                               {"dlq.enabled": "false", "duration": "1s"})
    out = herdsim.save(herdsim.run(sc), tmp_path / "run", formats=[])
    again = load_outputs(out).scenario
    assert describe.overrides(again) == ["dlq.enabled=false", "duration=1s"]
    plain = herdsim.save(herdsim.run(herdsim.load_scenario(out / "scenario.yaml")),
                         tmp_path / "plain", formats=[])
    assert not (plain / "overrides.json").exists()
    assert describe.overrides(load_outputs(plain).scenario) == []


@pytest.mark.slow
def test_plot_kinds_and_formats(tmp_path, make_scenario):
    out = herdsim.save(herdsim.run(herdsim.load_scenario(make_scenario(duration="1s"))),
                       tmp_path / "run")
    result = CliRunner().invoke(app, ["plot", str(out), "--kinds", "landing",
                                      "--format", "png,svg,pdf"])
    assert result.exit_code == 0, result.output
    assert all((out / f"landing.{fmt}").stat().st_size > 0 for fmt in ("png", "svg", "pdf"))
    assert not (out / "kpis.png").exists()
    result = CliRunner().invoke(app, ["plot", str(out), "--kinds", "pie"])
    assert result.exit_code == 2 and "--kinds pie" in result.output


# --- ten arms: every label legible, every colour told apart -------------------------------

TEN_PRESETS = ["sidekiq", "celery", "aws-standard", "aws-legacy", "grpc-connect", "envoy",
               "polly", "resilience4j", "tenacity", "kafka"]


def _small_stacks(make_scenario):
    """The outage story at a hundredth of its size: 4 s, 30 workers, a 1 s outage at 1 s,
    a crash rule, a waiting room."""
    return herdsim.load_scenario(make_scenario(
        duration="4s", workload={"rate": 70}, workers={"count": 30},
        downstream={"concurrency": 20, "queue_limit": 10,
                    "service": {"distribution": "exponential", "mean": "200ms"},
                    "timeout": "2s", "outages": [{"start": "1s", "duration": "1s"}],
                    "overload": {"collapse": {"window": "100ms", "threshold": 15,
                                              "restart_time": "500ms"}}}))


@pytest.fixture(scope="module")
def ten(make_scenario):
    """Ten library presets (tenacity's immediate retries included) on the small story."""
    return herdsim.compare(_small_stacks(make_scenario), presets=TEN_PRESETS, processes=1,
                           progress=False)


@pytest.fixture(scope="module")
def four(make_scenario):
    """Four presets: a 16:9 figure, whose rows are the shortest (and carry y labels)."""
    return herdsim.compare(_small_stacks(make_scenario), presets=TEN_PRESETS[:4],
                           processes=1, progress=False)


def drawn_texts(figure) -> list:
    """``(text, bounding box in pixels)`` of every text the figure draws: titles, labels,
    legends, annotations, and the tick labels matplotlib keeps (a tick outside the view
    is not drawn, so not counted)."""
    from matplotlib.axis import Tick
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    tick_texts = {id(t) for tick in figure.findobj(Tick) for t in (tick.label1, tick.label2)}
    shown = [t for ax in figure.axes if ax.get_visible()
             for axis in (ax.xaxis, ax.yaxis) for tick in axis._update_ticks()
             for t in (tick.label1, tick.label2)]
    texts = [t for t in figure.findobj(Text) if id(t) not in tick_texts] + shown
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts
            if t.get_visible() and t.get_text().strip()]


SLACK = 2.0  # px: two texts touching at a corner (a 0 tick under a 0 tick) still read


@pytest.mark.parametrize("arms", ["four", "ten"])
@pytest.mark.parametrize("kind", ["timeline", "landing", "sleeps", "kpis"])
@pytest.mark.slow
def test_figures_of_many_arms_draw_no_text_over_another(request, arms, kind):
    """No two texts of a 4- or 10-arm figure overlap by more than SLACK pixels both ways
    (row titles and y labels, y tick labels of short panels, the down/open panel's arm
    names, the sleeps panels' titles, the KPI panels' titles and axis labels), and every
    text lies on the canvas."""
    assert_texts_apart_on_the_canvas(request.getfixturevalue(arms).plot(kind))


def assert_texts_apart_on_the_canvas(figure) -> None:
    """No two texts of *figure* overlap by more than SLACK pixels both ways, and every
    text lies on the canvas."""
    texts = drawn_texts(figure)
    width, height = figure.canvas.get_width_height()
    clashes = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(texts, 2)
               if min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0) > SLACK
               and min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0) > SLACK]
    assert not clashes, clashes[:5]
    off = [text for text, box in texts if box.x0 < -SLACK or box.y0 < -SLACK
           or box.x1 > width + SLACK or box.y1 > height + SLACK]
    assert not off, off


@pytest.mark.slow
def test_ten_arms_get_ten_colours_told_apart(ten):
    styles = arm_styles(ten.arms)
    colours = [styles[arm.label]["color"] for arm in ten.arms]
    assert min(delta_e(a, b) for a, b in itertools.combinations(colours, 2)) >= MIN_DELTA_E


@given(st.lists(st.sampled_from([*PRESETS, *STRATEGY_COLORS, "pkg.mod:Mine", "a:B", "c:D"]),
                min_size=2, max_size=12, unique=True),
       st.lists(st.booleans(), min_size=12, max_size=12))
@settings(max_examples=300, deadline=None)
@pytest.mark.slow
def test_any_twelve_arms_keep_their_colours_apart(names, repeated):
    """Up to twelve arms in one figure, any mix of presets, built-in strategies, strategies
    of one's own and arms repeating a policy (None: a second arm of a policy, varying a
    setting): every two colours at least MIN_DELTA_E apart in CIELAB (25: the built-ins'
    own closest pair, blue and sky blue, is 26.4; about 2 is just noticeable), and a
    built-in strategy's first arm keeps its own colour."""
    arms = [None if again and i else name
            for i, (name, again) in enumerate(zip(names, repeated, strict=False))]
    colours = arm_colors(arms)
    assert sorted(colours) == list(range(len(arms)))
    assert min(delta_e(a, b) for a, b in itertools.combinations(colours.values(), 2)) \
        >= MIN_DELTA_E
    for i, name in enumerate(arms):
        if name in STRATEGY_COLORS:
            assert colours[i] == STRATEGY_COLORS[name]


def test_delta_e_matches_published_lab_values():
    """sRGB white is L* 100, a* = b* = 0; pure red is (53.24, 80.09, 67.20) (Lindbloom's
    calculator, D65)."""
    np.testing.assert_allclose(lab("#FFFFFF"), [100, 0, 0], atol=0.05)
    np.testing.assert_allclose(lab("#FF0000"), [53.24, 80.09, 67.20], atol=0.1)
    assert delta_e("#000000", "#FFFFFF") == pytest.approx(100, abs=0.05)


def test_peaks_are_stated_in_their_window(ten):
    """The timeline's rows and the KPI figure give a peak as calls in the window it was
    measured in (10ms), never scaled to calls per second; the capacity line is what the
    downstream serves in that window."""
    timeline = ten.plot("timeline")
    rights = [ax.get_title("right") for ax in timeline.axes[:len(ten.arms)]]
    assert all("calls in 10ms" in text and "calls/s" not in text for text in rights), rights
    kpi_titles = " ".join(ax.get_title("left") for ax in ten.plot("kpis").axes)
    assert "Peak calls in 10ms" in kpi_titles.replace("\n", " ")
    for arm, ax in zip(ten.arms, timeline.axes, strict=False):
        served = arm.scenario.downstream.capacity_rate() * arm.scenario.peak_window
        assert any(line.get_ydata()[0] == pytest.approx(served) for line in ax.lines
                   if line.get_linestyle() == "--")

"""Figures that fit the scenario: the landing picture against theory, only panels with
something to show, titles that say what was changed, labels off the data, 16:9."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config import bundled
from herdsim.outputs.compare_dir import load_outputs
from herdsim.plots import describe
from herdsim.plots.landing import RESOLUTION, landing_counts, landings


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
    fake = SimpleNamespace(scenario=sc, arms=[SimpleNamespace(label="exponential")],
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

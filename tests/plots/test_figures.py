"""Figures: valid images in every format, theory overlays that match, the plot command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import stats
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.outputs.compare_dir import load_outputs
from herdsim.plots.figures import (
    FIGURES,
    STRATEGY_COLORS,
    arm_styles,
    binned,
    draw,
    expected_counts,
    simulated_counts,
    sleep_prev,
    strategy_color,
)
from herdsim.plots.kinds import GRAPH_ONLY
from herdsim.results.comparison import Arm

SINGLE_TIER = [kind for kind in FIGURES if kind not in GRAPH_ONLY]  # a call graph adds graph


@pytest.fixture(scope="module")
def outage(make_scenario) -> dict:
    """4 s with a 1 s outage at 1 s: a few hundred retries per arm."""
    return make_scenario(
        duration="4s", workload={"rate": 200}, workers={"count": 40},
        downstream={"concurrency": 10, "outages": [{"start": "1s", "duration": "1s"}]},
        retry={"base": "100ms"},
    )


@pytest.fixture(scope="module")
def comparison(outage):
    """Three strategies (one without a closed form) x two DLQ settings."""
    return herdsim.compare(herdsim.load_scenario(outage),
                           ["exponential", "full_jitter", "decorrelated_jitter_v2"],
                           vary={"dlq.enabled": [True, False]}, processes=1, progress=False)


@pytest.fixture(scope="module")
def saved(comparison, tmp_path_factory):
    return herdsim.save(comparison, tmp_path_factory.mktemp("cmp") / "out", formats=["png"])


def check_image(path) -> None:
    """A non-empty image that its format's reader accepts."""
    assert path.stat().st_size > 0, path
    if path.suffix == ".png":
        with Image.open(path) as image:
            image.verify()
            assert image.format == "PNG" and min(image.size) > 100
    elif path.suffix == ".svg":
        assert ET.parse(path).getroot().tag.endswith("svg")
    else:
        assert path.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("kind", FIGURES)
@pytest.mark.slow
def test_every_figure_is_a_valid_image(comparison, tmp_path, kind):
    figure = draw(comparison, kind)
    for fmt in ("png", "svg", "pdf"):
        path = tmp_path / f"{kind}.{fmt}"
        figure.savefig(path, format=fmt)
        check_image(path)


def test_unknown_figure_is_refused(comparison):
    with pytest.raises(ValueError, match="unknown plot 'pie'"):
        draw(comparison, "pie")


def test_each_arm_gets_its_own_colour_and_strategies_keep_theirs(comparison):
    """Every arm has a colour of its own (two arms of one strategy differ by colour, and
    by line style too); a strategy's first arm has the strategy's colour."""
    styles = arm_styles(comparison.arms)
    assert len({s["color"] for s in styles.values()}) == len(comparison.arms)
    assert len({(s["color"], s["linestyle"]) for s in styles.values()}) == len(comparison.arms)
    firsts = {}
    for arm in comparison.arms:
        firsts.setdefault(arm.strategy, arm)
    for strategy, arm in firsts.items():
        assert styles[arm.label]["color"] == strategy_color(strategy)
    assert len({strategy_color(name) for name in herdsim.policies.backoff.BUILT_IN}) == 7
    assert strategy_color("pkg.mod:Mine") not in STRATEGY_COLORS.values()


def _sleeps_of(strategy: str, make_scenario, **retry) -> tuple[Arm, pd.DataFrame]:
    """Sleeps of a run whose downstream fails 60% of calls for 8 s (many retries,
    at many attempt numbers), in job order with each sleep's ``prev``."""
    sc = herdsim.load_scenario(make_scenario(
        seed=5, duration="10s", workload={"rate": 300}, workers={"count": 60},
        downstream={"concurrency": 30, "outages": [
            {"start": "1s", "duration": "8s", "mode": "error", "error_rate": 0.6}]},
        retry={"strategy": strategy, "base": "20ms", "cap": "1s", "max_retries": 6, **retry},
    ))
    result = herdsim.run(sc)
    sleeps = result.sleeps.assign(replication=0)
    return Arm(strategy, strategy, {}, sc), sleep_prev(sleeps, sc.retry.base)


@pytest.mark.parametrize("strategy", ["full_jitter", "decorrelated_jitter", "equal_jitter"])
def test_theory_overlay_fits_the_simulated_sleeps(make_scenario, strategy):
    """The overlay (sum of each sleep's cdf over the bin, given its attempt and prev) is
    the expected histogram: a chi-square test on bins expecting >= 5 sleeps does not
    reject it at the 0.1% level (fixed seed; a wrong ``prev`` fails decorrelated jitter
    by orders of magnitude)."""
    arm, ordered = _sleeps_of(strategy, make_scenario)
    strategy_obj = arm.scenario.retry.build()
    edges = np.linspace(0, 1.0, 41)
    observed = binned(ordered["sleep"].to_numpy(), edges)
    expected = expected_counts(strategy_obj, ordered, edges, chunk=997)
    assert len(ordered) > 2000
    assert expected.sum() == pytest.approx(observed.sum())  # every sleep lies in (0, cap]
    keep = expected >= 5
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_point_masses_land_in_the_same_bins_as_the_sleeps(make_scenario):
    """Exponential backoff is deterministic: the overlay equals the histogram exactly,
    sleeps sitting on bin edges included (both count bins as (b0, b1])."""
    arm, ordered = _sleeps_of("exponential", make_scenario)
    edges = np.arange(0, 1.3, 0.02)  # 0.02, 0.04, ... are edges
    observed = binned(ordered["sleep"].to_numpy(), edges)
    np.testing.assert_array_equal(
        expected_counts(arm.scenario.retry.build(), ordered, edges), observed)


def test_monte_carlo_overlay_fits_a_strategy_without_cdf(make_scenario):
    """decorrelated_jitter_v2 has no closed form: redrawing each job's chain reproduces
    the simulated histogram (chi-square, 0.1% level, fixed seeds)."""
    arm, ordered = _sleeps_of("decorrelated_jitter_v2", make_scenario)
    edges = np.linspace(0, 1.0, 26)
    observed = binned(ordered["sleep"].to_numpy(), edges)
    expected = simulated_counts(arm.scenario.retry.build(), ordered, edges,
                                arm.scenario.retry.base)
    keep = expected >= 5
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


@pytest.mark.slow
def test_plot_redraws_a_comparison_from_its_files(saved):
    """Every figure, from the saved CSVs alone; nothing left aside."""
    for path in saved.glob("*.png"):
        path.unlink()
    result = CliRunner().invoke(app, ["plot", str(saved), "--format", "png"])
    assert result.exit_code == 0, result.output
    for kind in SINGLE_TIER:
        check_image(saved / f"{kind}.png")
    assert not (saved / "graph.png").exists()  # a call graph's only
    assert not [p for p in saved.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_saved_comparison_reads_back_the_same(comparison, saved):
    back = load_outputs(saved)
    assert [a.label for a in back.arms] == [a.label for a in comparison.arms]
    pd.testing.assert_frame_equal(back.summary, comparison.summary, check_dtype=False)
    assert len(back.sleeps) == len(comparison.sleeps)


@pytest.mark.slow
def test_run_writes_a_timeline_and_plot_redraws_it(tmp_path, outage):
    """``run`` adds timeline.png and the short-window peaks it plots; their maximum is
    the summary's peak rate."""
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(outage))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    check_image(out / "timeline.png")
    peaks = pd.read_csv(out / "peak_rate.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert peaks["peak_rate"].max() == pytest.approx(summary["peak_attempt_rate"])
    result = CliRunner().invoke(app, ["plot", str(out), "--format", "pdf"])
    assert result.exit_code == 0, result.output
    for kind in SINGLE_TIER:
        check_image(out / f"{kind}.pdf")


@pytest.mark.parametrize("command", ["plot", "report"])
def test_plot_and_report_refuse_a_directory_that_is_not_a_run(tmp_path, command):
    (tmp_path / "notes.txt").write_text("hello")
    result = CliRunner().invoke(app, [command, str(tmp_path)])
    assert result.exit_code == 2
    assert "is not a herdsim output directory" in result.output
    assert "Traceback" not in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    result = CliRunner().invoke(app, [command, str(tmp_path / "missing")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_monte_carlo_theory_redraws_whole_chains_of_a_share_of_jobs():
    """Beyond MONTE_CARLO_SLEEPS sleeps, the theory of a strategy without a cdf redraws
    the sleeps of a random share of jobs: every sleep of a kept job (a chain depends on its
    previous sleep), none of the others, and about MONTE_CARLO_SLEEPS in all (binomial:
    within 5% at 100,000 expected, 15 standard deviations), the same share every time."""
    from herdsim.plots.sleeps import MONTE_CARLO_SLEEPS, _some_jobs

    rng = np.random.default_rng(3)
    jobs = rng.integers(0, 60_000, 4 * MONTE_CARLO_SLEEPS)
    frame = pd.DataFrame({"replication": rng.integers(0, 2, len(jobs)), "job": jobs,
                          "attempt": 0, "sleep": 1.0})
    kept = _some_jobs(frame)
    assert abs(len(kept) - MONTE_CARLO_SLEEPS) < 0.05 * MONTE_CARLO_SLEEPS
    chosen = set(zip(kept["replication"], kept["job"], strict=True))
    whole = frame[[pair in chosen for pair in zip(frame["replication"], frame["job"],
                                                  strict=True)]]
    assert len(whole) == len(kept)
    assert _some_jobs(frame).equals(kept)
    small = frame.iloc[:1000]
    assert _some_jobs(small) is small

"""The call-graph figure (``graph``): a box per tier laid out by depth, an arrow per edge
labelled with what a call carries, boxes tinted by the tiers' states; drawn for call
graphs only, and redrawn from a saved folder without importing the code it names."""

from __future__ import annotations

import copy
import sys

import pytest
import yaml
from conftest import graph
from matplotlib.colors import to_rgba
from typer.testing import CliRunner

import herdsim
from herdsim.plots import callgraph
from herdsim.plots.metastability_map import COLORS
from herdsim.policies.durations import format_duration
from herdsim.results.comparison import Comparison

DIAMOND = {  # front -> api (x2) -> db (x3), and front -> db directly: db sits below api
    "duration": "12s", "workload": {"rate": 20},
    "downstream.calls": [
        {"service": "api", "count": 2, "timeout": "1s",
         "retry": {"strategy": "full_jitter", "base": "50ms", "max_retries": 2}},
        {"service": "db", "timeout": "300ms",
         "hedging": {"delay": "20ms", "max_attempts": 3}}],
    "services.db.outages": [{"start": "5s", "duration": "1s", "mode": "down"}],
}


def artists(figure, prefix: str) -> dict:
    """The figure's artists whose gid starts with *prefix*, by gid."""
    return {a.get_gid(): a for a in figure.findobj(lambda a: (a.get_gid() or "")
                                                    .startswith(prefix))}


@pytest.fixture(scope="module")
def diamond():
    return herdsim.run(herdsim.load_scenario(graph(**DIAMOND)))


def test_one_box_per_tier_by_depth_and_one_labelled_arrow_per_edge(diamond):
    sc = diamond.scenario
    figure = diamond.plot("graph")
    boxes = artists(figure, "tier:")
    assert sorted(boxes) == sorted(f"tier:{n}" for n in ("front", "api", "db"))
    edges = [(name, e) for name, tier in herdsim.config.graph.tiers(
        sc.downstream, sc.services).items() for e in tier.calls]
    arrows, labels = artists(figure, "edge:"), artists(figure, "edge-label:")
    assert len(arrows) == len(labels) == len(edges) == 3
    for name, edge in edges:
        i = [e for n, e in edges if n == name].index(edge)
        key = f"{name}->{edge.service}:{i}"
        assert f"edge:{key}" in arrows and arrows[f"edge:{key}"].arrow_patch is not None
        text = labels[f"edge-label:{key}"].get_text()
        if edge.count > 1:
            assert f"×{edge.count} in parallel" in text
        if edge.hedging is not None:
            assert "hedge every 20ms, ≤3 copies" in text and "retries" not in text
        else:
            assert f"{edge.retry.strategy} ≤{edge.retry.max_retries} retries" in text
        assert ("no timeout" if edge.timeout is None else
                f"timeout {format_duration(edge.timeout)}") in text
    y = {gid[5:]: box.get_position()[1] for gid, box in boxes.items()}
    assert y["front"] > y["api"] > y["db"]  # a longest path: db under api, not beside it
    assert "1,000" not in artists(figure, "workers")["workers"].get_text()
    assert "50 workers" in artists(figure, "workers")["workers"].get_text()


def test_each_box_is_tinted_by_its_tiers_state_and_the_headline_is_bold(diamond):
    tiers = diamond.summary["tiers"]
    boxes = artists(diamond.plot("graph"), "tier:")
    widths = {}
    for gid, box in boxes.items():
        name = gid[5:]
        patch = box.get_bbox_patch()
        assert patch.get_facecolor() == pytest.approx(
            to_rgba(COLORS[tiers[name]["state"]], callgraph.TINT))
        assert tiers[name]["state"] in box.get_text()
        widths[name] = patch.get_linewidth()
    headline = diamond.summary["headline_tier"]
    assert widths[headline] > max(w for n, w in widths.items() if n != headline)


def test_the_states_follow_each_arm_and_a_grid_holds_eight_arms(diamond):
    """Arms whose tiers' states differ get their own colours; 8 arms fit a 2 x 4 grid."""
    base = Comparison.from_result(diamond)
    arm = base.arms[0]
    summary = base.summary.copy()
    rows = []
    states = ["recovered", "degraded", "metastable"]
    arms = []
    for k in range(8):
        row = summary.iloc[0].copy()
        row["arm"] = f"arm {k}"
        for j, name in enumerate(("front", "api", "db")):
            row[f"tiers.{name}.state"] = states[(k + j) % 3]
        rows.append(row)
        arms.append(copy.copy(arm))
        arms[-1].label = f"arm {k}"
    fake = copy.copy(base)
    fake.arms, fake.summary = arms, type(summary)(rows).reset_index(drop=True)
    figure = callgraph.graph(fake)
    panels = [ax for ax in figure.axes if ax.get_visible() and ax.texts]
    assert len(panels) == 8
    assert len({round(ax.get_position().y0, 3) for ax in panels}) == 2  # two rows of four
    for k, ax in enumerate(panels):
        for text in ax.texts:
            gid = text.get_gid() or ""
            if gid.startswith("tier:"):
                j = ("front", "api", "db").index(gid[5:])
                assert text.get_bbox_patch().get_facecolor() == pytest.approx(
                    to_rgba(COLORS[states[(k + j) % 3]], callgraph.TINT))


@pytest.mark.slow
def test_only_a_call_graph_gets_the_figure(tmp_path, diamond):
    plain = herdsim.save(herdsim.run(herdsim.load_scenario("scenarios/retries.yaml")),
                         tmp_path / "plain")
    assert sorted(p.name for p in plain.iterdir()) == sorted([
        "checksums.json", "jobs.parquet", "landing.png", "peak_rate.csv", "scenario.yaml",
        "sleeps.csv", "summary.json", "timeline.png", "timeseries.csv"])
    assert (herdsim.save(diamond, tmp_path / "graph") / "graph.png").is_file()
    from herdsim.cli import app

    done = CliRunner().invoke(app, ["plot", str(plain), "--kinds", "graph"])
    assert done.exit_code == 2 and "call graph" in done.stderr
    assert not (plain / "graph.png").exists()


@pytest.mark.slow
def test_plot_redraws_the_graph_without_importing_the_code_it_names(tmp_path):
    """An edge's strategy named as code in the saved scenario stays a name: ``herdsim
    plot`` draws it from scenario.yaml and never imports it."""
    out = herdsim.save(herdsim.run(herdsim.load_scenario(graph(**DIAMOND))), tmp_path / "g")
    text = (out / "scenario.yaml").read_text()
    assert text.count("strategy: full_jitter") >= 2  # the workers' and the api edge's
    (out / "scenario.yaml").write_text(text.replace("strategy: full_jitter",
                                                    "strategy: evil_graph_xyz:Boom"))
    (out / "checksums.json").unlink()  # an edit by hand: the reader must still not import
    (out / "graph.png").unlink()
    from herdsim.cli import app

    done = CliRunner().invoke(app, ["plot", str(out), "--kinds", "graph"])
    assert done.exit_code == 0, done.output
    assert (out / "graph.png").is_file()
    assert "evil_graph_xyz" not in sys.modules
    from herdsim.outputs.compare_dir import load_outputs

    labels = artists(load_outputs(out).plot("graph"), "edge-label:")
    assert any("Boom ≤2 retries" in t.get_text() for t in labels.values())


@pytest.mark.slow
def test_a_comparison_writes_the_graph_and_the_report_shows_it(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(graph(**DIAMOND)))
    from herdsim.cli import app

    done = CliRunner().invoke(app, ["compare", str(path), "--strategies",
                                    "exponential,full_jitter", "--processes", "1",
                                    "--out", str(tmp_path / "c"), "--format", "png",
                                    "--report"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "c" / "graph.png").is_file()
    page = (tmp_path / "c" / "report.html").read_text()
    assert 'alt="graph"' in page and "The call graph" in page


def test_a_cached_tiers_box_gives_its_hit_rate():
    """A cache in front of db: its box says the hit rate the run measured (the summary's
    tiers.db.cache_hit_rate, as the run table gives it); the other boxes say nothing of
    a cache."""
    cached = dict(DIAMOND, **{"services.db.cache": {
        "size": 20, "keys": {"distribution": "uniform", "count": 40}}})
    res = herdsim.run(herdsim.load_scenario(graph(**cached)))
    rate = res.summary["tiers"]["db"]["cache_hit_rate"]
    assert 0 < rate < 1
    boxes = artists(res.plot("graph"), "tier:")
    assert f"cache hit rate {rate:.0%} over the run" in boxes["tier:db"].get_text()
    assert "cache" not in boxes["tier:front"].get_text() + boxes["tier:api"].get_text()

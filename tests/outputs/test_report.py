"""report.html: one self-contained file a reviewer can act on: a verdict computed from the
KPIs, intervals and ties only over replications, the scenario as written, a glossary from
the KPI registry, an inline interactive timeline, and sweep directories."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

import herdsim
from herdsim.analysis.kpis import REGISTRY
from herdsim.analysis.metastability import RANK_RULE
from herdsim.cli import app
from herdsim.config import bundled
from herdsim.outputs.report import interactive, render
from herdsim.outputs.report.verdict import NOT_RECOVERED, Stat, ties
from herdsim.plots import describe
from herdsim.plots.figures import FIGURES
from herdsim.plots.kinds import GRAPH_ONLY

SINGLE_TIER = [kind for kind in FIGURES if kind not in GRAPH_ONLY]  # a call graph adds graph

class Collector(HTMLParser):
    """Every attribute that can pull a resource in, every image, script and table cell."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.cells: list[str] = []
        self.scripts: list[dict] = []
        self.metas: list[dict] = []
        self.tags: set[str] = set()
        self._in_cell = False

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "data", "poster", "action"):
                self.links.append(value or "")
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag == "script":
            self.scripts.append(dict(attrs))
        if tag == "meta":
            self.metas.append(dict(attrs))
        self._in_cell = tag in ("td", "th")

    def handle_endtag(self, tag):
        self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self.cells.append(data.strip())


def parse(text: str) -> Collector:
    parser = Collector()
    parser.feed(text)
    return parser


@pytest.fixture(scope="module")
def blip(make_scenario):
    return herdsim.load_scenario(make_scenario(
        name="blip", duration="3s", workload={"rate": 100},
        downstream={"outages": [{"start": "1s", "duration": "500ms"}]}))


@pytest.fixture(scope="module")
def report(blip, tmp_path_factory):
    c = herdsim.compare(blip, ["fixed", "full_jitter"], replications=2, processes=1,
                        progress=False)
    out = herdsim.save(c, tmp_path_factory.mktemp("r") / "out", formats=["png"], report=True)
    return c, out / "report.html"


@pytest.fixture(scope="module")
def single(blip):
    return herdsim.compare(blip, ["fixed", "full_jitter"], processes=1, progress=False)


@pytest.fixture(scope="module")
def single_page(single) -> str:
    """The report of one replication per arm, without figures (drawn elsewhere)."""
    return render(single, kinds=())


@pytest.mark.slow
def test_report_is_self_contained(report):
    """No src/href points outside the file; scripts are inline; a CSP forbids requests."""
    _, path = report
    parser = parse(path.read_text(encoding="utf-8"))
    assert parser.links, "the report embeds its figures"
    assert all(link.startswith(("data:", "#")) for link in parser.links), parser.links
    assert not {"link", "iframe", "object", "embed"} & parser.tags
    assert parser.scripts and all("src" not in s for s in parser.scripts)
    (csp,) = [m["content"] for m in parser.metas
              if m.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert len(parser.images) == len(SINGLE_TIER)
    for src in parser.images:
        header, _, data = src.partition(",")
        assert header == "data:image/png;base64"
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            image.verify()


def test_two_replications_show_intervals_and_the_verdict(report):
    c, path = report
    text = path.read_text(encoding="utf-8")
    parser = parse(text)
    for label in ("fixed", "full_jitter"):
        assert label in parser.cells
    assert any("±" in cell for cell in parser.cells)
    assert "2 replications per arm" in text and "--replications" not in text
    assert "Verdict" in text and "of jobs succeeded" in text


def test_one_replication_shows_no_intervals_and_says_so(single, single_page):
    """With one run per arm there is no ± anywhere, the reader is told how to get intervals,
    and the key numbers' note says one thing about the order: the arms are ranked by the
    rule, and with single values a small difference may be noise (not both "not a
    ranking" and "ranked")."""
    text = single_page
    parser = parse(text)
    assert not any("±" in cell for cell in parser.cells)
    note = re.search(r"<h2>Key numbers</h2>\s*<p class='note'>(.*?)</p>", text, re.S).group(1)
    assert "--replications" in note and "noise" in note
    assert f"Arms are {html.escape(RANK_RULE)}." in note and "not a ranking" not in note


def test_ties_are_intervals_that_overlap_the_best():
    stats = {"a": Stat(10.0, 1.0, 3), "b": Stat(11.5, 1.0, 3), "c": Stat(20.0, 1.0, 3)}
    assert ties(stats, "lower") == ["a", "b"]  # [9, 11] meets [10.5, 12.5]
    assert ties(stats, "higher") == ["c"]
    single = {"a": Stat(10.0, np.nan, 1), "b": Stat(10.2, np.nan, 1)}
    assert ties(single, "lower") == ["a"]  # no interval: only an exact tie is one


def test_recovery_vocabulary_is_one(single, single_page):
    """An arm without a recovery time reads 'not recovered within the run', never 'never'."""
    text = single_page
    cells = parse(text).cells
    assert "never" not in " ".join(cells)
    for arm in single.arms:
        run = single.runs[single.runs["arm"] == arm.label].iloc[0]
        if np.isnan(float(run["recovery_time"])):
            assert NOT_RECOVERED in text


def test_glossary_comes_from_the_registry(single, single_page):
    """Every KPI shown in the table is explained with the registry's meaning."""
    text = single_page
    glossary = text[text.index("<h2>Glossary</h2>"):]
    shown = [k for k in (kpi.key for kpi in REGISTRY) if f"<code>{k}</code>" in glossary]
    assert "recovery_time" in shown and "peak_to_capacity" in shown
    for kpi in REGISTRY:
        if kpi.key in shown:
            assert html.escape(kpi.meaning) in glossary


def test_scenario_is_shown_as_written_with_units(single, single_page):
    """Only non-default fields, durations as the file writes them."""
    text = single_page
    section = text[text.index("Scenario as written"):]
    assert "duration: 3s" in section and "start: 1s" in section and "duration: 500ms" in section
    assert "breaker:" not in section  # all defaults
    assert "rate: 100  # jobs per second" in section


@pytest.mark.parametrize("name", bundled.names())
def test_the_scenario_as_written_loads_back_the_same(name):
    """Dropping defaults and adding units loses nothing: the text shown reloads to the
    same validated scenario (the description is shown apart)."""
    sc = herdsim.load_scenario(bundled.path(name))
    shown = yaml.safe_load(describe.written_yaml(sc))
    assert herdsim.load_scenario({**shown, "description": sc.description}) == sc


def test_interactive_panels_share_one_resolution(single):
    """Both panels are, per bin, the busiest peak_window: calls from the saved peaks
    (analysis.peak_rate's sliding window), retries landing from a brute-force count of
    sleep ends per 10 ms; a landing retry is a call, so in no bin do more retries land
    than calls are made (the sliding window over calls can only see more)."""
    data = interactive.payload(single)
    sc = single.scenario
    width, window = sc.bin, sc.peak_window
    assert data["window"] == window and "busiest" in data["what"]
    for arm, plotted in zip(single.arms, data["arms"], strict=True):
        sleeps = single.sleeps[single.sleeps["arm"] == arm.label]
        lands = np.sort((sleeps["time"] + sleeps["sleep"]).to_numpy())
        peaks = single.peaks[single.peaks["arm"] == arm.label]["peak_rate"].to_numpy()
        assert plotted["calls"] == pytest.approx(np.round(peaks * window, 1).tolist())
        for i, rate in enumerate(plotted["landBins"]):
            counts = [((lands >= i * width + k * window - 1e-9)
                       & (lands < i * width + (k + 1) * window - 1e-9)).sum()
                      for k in range(int(round(width / window)))]
            assert rate == pytest.approx(max(counts), abs=0.05)
            assert rate <= plotted["calls"][i] + 0.05
    script = interactive.section(single).split('type="application/json">')[1]
    assert "</script" not in script.split("</script>")[0]


@pytest.mark.slow
def test_report_command_on_a_run_directory(tmp_path, make_scenario):
    """``herdsim report DIR`` on a run's output; rerunning replaces the report."""
    run = herdsim.run(herdsim.load_scenario(make_scenario(duration="1s")))
    out = herdsim.save(run, tmp_path / "run")
    for _ in range(2):
        result = CliRunner().invoke(app, ["report", str(out)])
        assert result.exit_code == 0, result.output
    text = (out / "report.html").read_text(encoding="utf-8")
    assert len(parse(text).images) == len(SINGLE_TIER)
    assert "No outage in this scenario" in text
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_report_command_on_a_sweep_directory(tmp_path, make_scenario):
    """A sweep directory gets its map and its table of cells."""
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(make_scenario(
        duration="3s", downstream={"outages": [{"start": "1s", "duration": "200ms"}]})))
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, [
        "sweep", str(path), "--grid", "workload.rate=20,60", "--strategies",
        "fixed,full_jitter", "--out", str(out), "--processes", "1"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "report.html").read_text(encoding="utf-8")
    parser = parse(text)
    assert len(parser.images) == 1 and parser.images[0].startswith("data:image/png")
    for strategy in ("fixed", "full_jitter"):
        assert re.search(rf"{strategy} recovers in \d+ of 2 cells", text)
    assert "workload.rate" in parser.cells


def test_a_wide_table_is_cut_into_narrow_ones_that_keep_every_column():
    """The per-tier table of a call graph had 12 columns and scrolled its recovery out of
    sight (and out of print): it is cut into tables of at most 5 columns besides the arm
    and the tier, which every one repeats, and no column is lost or repeated."""
    import pandas as pd

    from herdsim.outputs.report.page import _narrow_tables

    frame = pd.DataFrame([{"arm": "a", "tier": "db", **{f"k{i}": i for i in range(12)}}])
    page = _narrow_tables(frame, ["arm", "tier"])
    tables = [re.findall(r"<th>(.*?)</th>", t) for t in page.split("</table>")[:-1]]
    assert all(t[:2] == ["arm", "tier"] and len(t) <= 7 for t in tables)
    assert [c for t in tables for c in t[2:]] == [f"k{i}" for i in range(12)]


def test_the_verdict_says_which_loop_holds_an_arm_down_with_its_figures():
    """reconnect.yaml: the fixed arm's line names its loops and the figures that named
    them against their thresholds (2 connects per disconnected client: the 4 s tail over
    the 2 s backoff); the recovered arm's names none. It said "held down by" alone."""
    from herdsim.outputs.report.verdict import verdict

    c = herdsim.compare(herdsim.load_scenario(bundled.path("reconnect")), ["fixed", "full_jitter"],
                        processes=1, progress=False)
    lines = verdict(c)
    fixed = next(line for line in lines if line.startswith("fixed:"))
    assert "held down by workload amplification + crash-restart cycles over the run's " \
           "tail (2 calls per open job, above 1.5; down " in fixed
    jitter = next(line for line in lines if line.startswith("full_jitter:"))
    assert "held down" not in jitter and "recovered" in jitter


def test_the_per_tier_table_has_a_column_only_where_some_tier_has_the_kpi():
    """A graph without a cache: no cache columns of n/a in the report's per-tier table
    (the run's table already left them out); with a cache on db, its hit rate is there,
    n/a for the tiers without one."""
    from conftest import graph

    from herdsim.outputs.report.page import tier_section

    def headers(data: dict) -> str:
        run = herdsim.run(herdsim.load_scenario(data))
        return tier_section(herdsim.Comparison.from_result(run))

    plain = headers(graph(duration="6s"))
    assert "<th>cache hit rate</th>" not in plain and "<th>calls</th>" in plain
    cached = headers(graph(**{"duration": "6s", "services.db.cache": {
        "size": 5, "keys": {"distribution": "uniform", "count": 10}}}))
    assert "<th>cache hit rate</th>" in cached


def test_a_tier_without_a_kpi_reads_na_not_the_kpis_missing_words():
    """db's cache flushed and refilled at once: the refill column is there for db; the
    tiers without a cache have no refill time to miss (they read 'not refilled')."""
    from conftest import graph

    from herdsim.outputs.report.page import tier_section

    run = herdsim.run(herdsim.load_scenario(graph(**{
        "duration": "6s", "services.db.cache": {
            "size": 10, "keys": {"distribution": "uniform", "count": 10}},
        "services.db.outages": [{"mode": "flush", "start": "1s", "duration": "1ms"}]})))
    assert run.summary["tiers"]["db"]["cache_refill_time"] is not None
    table = tier_section(herdsim.Comparison.from_result(run))
    assert "<th>cache refill time</th>" in table and "not refilled" not in table

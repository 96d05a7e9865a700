"""report.html: one self-contained file with the scenario, the KPI table and the figures."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser

import pytest
from PIL import Image
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.plots.figures import FIGURES


class Collector(HTMLParser):
    """Every attribute that can pull a resource in, every image and table cell."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.cells: list[str] = []
        self.tags: set[str] = set()
        self._in_cell = False

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "data", "poster", "action"):
                self.links.append(value or "")
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        self._in_cell = tag in ("td", "th")

    def handle_endtag(self, tag):
        self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self.cells.append(data.strip())


@pytest.fixture(scope="module")
def report(make_scenario, tmp_path_factory):
    sc = herdsim.load_scenario(make_scenario(
        name="blip", duration="3s", workload={"rate": 100},
        downstream={"outages": [{"start": "1s", "duration": "500ms"}]}))
    c = herdsim.compare(sc, ["fixed", "full_jitter"], replications=2, processes=1,
                        progress=False)
    out = herdsim.save(c, tmp_path_factory.mktemp("r") / "out", formats=["svg"], report=True)
    return c, out / "report.html"


def test_report_is_self_contained(report):
    """No src/href points outside the file: images are data: URIs, links are anchors."""
    _, path = report
    parser = Collector()
    parser.feed(path.read_text(encoding="utf-8"))
    assert parser.links, "the report embeds its figures"
    assert all(link.startswith(("data:", "#")) for link in parser.links), parser.links
    assert not {"script", "link", "iframe"} & parser.tags
    assert len(parser.images) == len(FIGURES)
    for src in parser.images:
        header, _, data = src.partition(",")
        assert header == "data:image/png;base64"
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            image.verify()


def test_report_holds_scenario_and_kpi_table(report):
    c, path = report
    text = path.read_text(encoding="utf-8")
    parser = Collector()
    parser.feed(text)
    assert "name: blip" in text  # the scenario YAML
    for label in ("fixed", "full_jitter"):
        assert label in parser.cells
    assert any("±" in cell for cell in parser.cells)  # 2 replications: intervals shown


def test_report_command_on_a_run_directory(tmp_path, make_scenario):
    """``herdsim report DIR`` on a run's output; rerunning replaces the report."""
    run = herdsim.run(herdsim.load_scenario(make_scenario(duration="1s")))
    out = herdsim.save(run, tmp_path / "run")
    for _ in range(2):
        result = CliRunner().invoke(app, ["report", str(out)])
        assert result.exit_code == 0, result.output
    parser = Collector()
    parser.feed((out / "report.html").read_text(encoding="utf-8"))
    assert len(parser.images) == len(FIGURES)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []

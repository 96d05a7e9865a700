"""The docs cannot drift from the code: every scenario field, summary key and time-series
column the code produces is named in the documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

import herdsim
from herdsim.config.scenario import Scenario
from herdsim.config.schema import fields, model_at

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def tiny_run():
    scenario = herdsim.load_scenario({
        "name": "docs", "duration": "2s", "workload": {"rate": 50},
        "downstream": {"outages": [{"start": "1s", "duration": "500ms"}]},
    })
    return herdsim.run(scenario)


def _tables() -> dict[str, str]:
    """docs/scenarios.md's field tables by section heading (``workload.spikes[]`` read as
    ``workload.spikes``, ``Top level`` as ``""``): heading -> the text under it."""
    tables, heading = {}, None
    for line in (DOCS / "scenarios.md").read_text().splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip().removesuffix("[]")
            heading = "" if heading == "Top level" else heading
            tables.setdefault(heading, "")
        elif heading is not None:
            tables[heading] += line + "\n"
    return tables


def _documented_as(section: str) -> list[str]:
    """The headings that may document *section*'s fields: its own, and any other section
    of the same schema class (``network_delay`` has ``service``'s fields)."""
    model = model_at(Scenario, section)
    return [path for path in ["", *(p for p, _ in fields(Scenario))]
            if path == section or model_at(Scenario, path) is model]


@pytest.mark.slow
@pytest.mark.parametrize("path", [path for path, _ in fields(Scenario)])
def test_every_scenario_field_is_documented_in_its_section(path):
    """docs/scenarios.md has a row for every schema field in the table of its own section
    (``workload.rate`` under ``## workload``, not any ``rate``)."""
    section, _, name = path.rpartition(".")
    tables = _tables()
    rows = [tables.get(heading, "") for heading in _documented_as(section)]
    assert any(f"| `{name}` |" in row for row in rows), \
        f"{path}: no `{name}` row under the {section or 'Top level'} heading of docs/scenarios.md"


def test_every_summary_key_and_column_is_documented(tiny_run):
    """docs/model.md names every summary key and every time-series column."""
    text = (DOCS / "model.md").read_text()
    missing = [key for key in [*tiny_run.summary, *tiny_run.timeseries.columns]
               if f"`{key}`" not in text]
    assert not missing, f"not in docs/model.md: {missing}"


FAMILIES_START, FAMILIES_END = "<!-- families: herdsim families -->", "<!-- /families -->"


def test_the_families_table_is_the_registrys():
    """docs/scenarios.md's families table is :func:`herdsim.config.families.markdown`
    (regenerate: paste its output between the markers)."""
    from herdsim.config.families import markdown

    text = (DOCS / "scenarios.md").read_text()
    assert FAMILIES_START in text and FAMILIES_END in text
    shown = text.split(FAMILIES_START)[1].split(FAMILIES_END)[0].strip()
    assert shown == markdown().strip()


def test_every_key_of_a_predicted_summary_is_documented():
    """A prediction's summary holds run keys (docs/model.md) and its own (docs/predict.md):
    each is named in one of them."""
    text = (DOCS / "model.md").read_text() + (DOCS / "predict.md").read_text()
    summary = herdsim.predict(DOCS.parent / "herdsim" / "scenarios" / "outage.yaml").summary
    missing = [key for key in summary if f"`{key}`" not in text]
    assert not missing, f"not in docs/model.md or docs/predict.md: {missing}"

"""The docs cannot drift from the code: every scenario field, summary key and time-series
column the code produces is named in the documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

import herdsim
from herdsim.config.scenario import Scenario
from herdsim.config.schema import fields

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def tiny_run():
    scenario = herdsim.load_scenario({
        "name": "docs", "duration": "2s", "workload": {"rate": 50},
        "downstream": {"outages": [{"start": "1s", "duration": "500ms"}]},
    })
    return herdsim.run(scenario)


@pytest.mark.parametrize("path", [path for path, _ in fields(Scenario)])
def test_every_scenario_field_is_documented(path):
    """docs/scenarios.md names every field of the schema in backticks."""
    text = (DOCS / "scenarios.md").read_text()
    assert f"`{path.rsplit('.', 1)[-1]}`" in text, f"{path} is not in docs/scenarios.md"


def test_every_summary_key_and_column_is_documented(tiny_run):
    """docs/model.md names every summary key and every time-series column."""
    text = (DOCS / "model.md").read_text()
    missing = [key for key in [*tiny_run.summary, *tiny_run.timeseries.columns]
               if f"`{key}`" not in text]
    assert not missing, f"not in docs/model.md: {missing}"

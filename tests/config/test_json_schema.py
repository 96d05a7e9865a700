"""``herdsim schema`` and the bundled ``scenario.schema.json``: generated from the
scenario's sections and families, current, and neither stricter nor looser than
``herdsim validate`` where an editor would notice.

The JSON Schema is checked by an independent validator (``jsonschema``, Draft 2020-12)
against what pydantic accepts: every bundled scenario and scenarios drawn across the whole
schema (``scenario_gen``) pass it; a field no section has, or a member's field given to
another member, is flagged by it as by the loader.
"""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft202012Validator
from scenario_gen import repaired, scenarios
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.config import bundled
from herdsim.config.json_schema import MODELINE, scenario_schema, schema_text

VALIDATOR = Draft202012Validator(scenario_schema())


def bundled_files():
    return sorted(bundled.directory().glob("*.yaml"))


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(scenario_schema())


def test_the_bundled_schema_file_is_the_generated_one():
    """Regenerate with ``herdsim schema > herdsim/scenarios/scenario.schema.json``."""
    assert (bundled.directory() / bundled.SCHEMA).read_text(encoding="utf-8") == schema_text()


def test_herdsim_schema_prints_it():
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == scenario_schema()


@pytest.mark.parametrize("path", bundled_files(), ids=lambda p: p.name)
def test_a_bundled_scenario_carries_the_modeline_and_passes_the_schema(path):
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == MODELINE
    errors = sorted(VALIDATOR.iter_errors(yaml.safe_load(text)), key=str)
    assert not errors, [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=scenarios(), draw=__import__("hypothesis").strategies.data())
def test_what_the_loader_accepts_the_schema_accepts(data, draw):
    """A scenario the loader validates passes the JSON Schema, written as a user would (the
    dumped form, durations as seconds)."""
    scenario = repaired(data, draw.draw)
    if scenario is None:
        return
    dumped = json.loads(scenario.model_dump_json())
    errors = list(VALIDATOR.iter_errors(dumped))
    assert not errors, [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]


@pytest.mark.parametrize("change", [
    {"workers": {"count": 10, "poll_intervall": 1}},  # misspelt
    {"downstream": {"admission": {"kind": "aimd", "limit": 5}}},  # fixed's field
    {"downstream": {"admission": {"kind": "nope"}}},  # no such member
    {"downstream": {"admission": {"kind": "fixed"}}},  # its required field missing
    {"duration": "ten seconds"},  # not a duration
])
def test_what_the_loader_refuses_an_editor_flags(change, tmp_path):
    from herdsim.config.loading import load_scenario
    from herdsim.errors import ScenarioError

    doc = yaml.safe_load((bundled.directory() / "outage.yaml").read_text())
    for key, value in change.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError):
        load_scenario(path)
    assert list(VALIDATOR.iter_errors(doc)), "the JSON Schema let it through"


def test_scenarios_copied_out_keep_their_schema(tmp_path):
    result = CliRunner().invoke(app, ["scenarios", "--copy-to", str(tmp_path / "mine")])
    assert result.exit_code == 0, result.output
    copied = tmp_path / "mine" / bundled.SCHEMA
    assert copied.read_text(encoding="utf-8") == schema_text()


def test_herdsim_families_shows_every_members_text_as_written():
    """Every member's row, its brackets included (``uniform on [v/2, v]`` is text, not
    markup), in a table wide enough not to wrap; and the command prints them."""
    from rich.console import Console

    from herdsim.cli.schema import tables
    from herdsim.config.families import FAMILIES

    console = Console(width=500, record=True)
    for table in tables():
        console.print(table)
    shown = console.export_text()
    for family in FAMILIES:
        for name, _about, _, _, fluid in family.rows():
            assert name in shown and fluid in shown, (name, fluid)
    assert CliRunner().invoke(app, ["families"]).exit_code == 0

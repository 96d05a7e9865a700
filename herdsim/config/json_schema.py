"""The scenario's JSON Schema, generated from the sections and the families' unions: what
``herdsim schema`` prints and the bundled scenarios' editor modeline points to
(``scenarios/scenario.schema.json``, kept equal to it by the tests)."""

from __future__ import annotations

import json
from typing import Any

from herdsim.config.bundled import SCHEMA
from herdsim.config.scenario import Scenario

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MODELINE = f"# yaml-language-server: $schema={SCHEMA}"  # a bundled scenario's first line


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file, as accepted on input (durations as ``250ms``
    or seconds; a family's member chosen by its tag)."""
    schema = Scenario.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "title": "herdsim scenario", **schema}


def schema_text() -> str:
    """:func:`scenario_schema` as the file is written: indented, sorted, one final newline."""
    return json.dumps(scenario_schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"

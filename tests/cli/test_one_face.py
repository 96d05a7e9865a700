"""One command line (issue 22): completion of names, one --format default, one metavar
style, --fail-if saying what it saw and what was meant, sweep with --json/--quiet/
--fail-if. In-process with typer's CliRunner; tiny runs."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.config import bundled
from herdsim.errors import UsageError
from herdsim.policies import presets
from herdsim.policies.backoff import registry as strategies


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def complete(words: str) -> list[str]:
    """What bash completion offers for the command line *words* (the last one incomplete),
    through click's own completion protocol."""
    parts = words.split(" ")
    env = {**os.environ, "_HERDSIM_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(parts) - 1)}
    result = CliRunner().invoke(app, [], env=env, prog_name="herdsim")
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("words, expected", [
    ("herdsim run out", [n for n in bundled.names() if n.startswith("out")]),
    ("herdsim compare outage --strategies exponential,full", ["exponential,full_jitter"]),
    ("herdsim compare outage --presets aws-", [f"aws-{n[4:]}" for n in presets.PRESETS
                                              if n.startswith("aws-")]),
    ("herdsim reproduce ret", ["retries"]),
    ("herdsim presets cel", ["celery"]),
])
def test_completion_offers_scenarios_strategies_presets_and_experiments(words, expected):
    offered = complete(words)
    assert expected and all(item in offered for item in expected), offered
    assert "exponential" in strategies.available()


def test_every_command_draws_png_by_default_and_names_its_arguments_in_capitals():
    for command in ("run", "compare", "plot"):
        text = invoke(command, "--help").stdout
        if "--format" in text:
            assert re.search(r"--format FORMATS.*\[default:\s+png\]", text, re.S), command
    for command in ("run", "compare", "sweep", "plot", "report", "reproduce", "presets",
                    "validate"):
        usage = invoke(command, "--help").stdout.splitlines()[0]
        arguments = re.findall(r"[\[{]?([A-Za-z_]+)[\]}]?$", usage)
        assert all(a.isupper() for a in arguments), usage
        options = [line for line in invoke(command, "--help").stdout.splitlines()
                   if line.lstrip().startswith("--")]
        assert not any("<" in line.split("  ")[1] for line in options), options  # no <str>


def test_a_misspelt_kpi_gets_a_suggestion():
    from herdsim.cli.gate import parse

    with pytest.raises(UsageError, match="did you mean goodput"):
        parse(["goodpt < 0.9"])
    with pytest.raises(UsageError, match="did you mean recovery_time"):
        parse(["recovery_tim > 5"])


def test_a_failed_gate_prints_the_value_it_saw(tmp_path, make_scenario):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(make_scenario()))
    out = tmp_path / "out"
    result = invoke("run", str(path), "--out", str(out), "--quiet", "--fail-if",
                    "jobs_submitted > 1")
    summary = json.loads((out / "summary.json").read_text())
    assert result.exit_code == 3
    assert f"(jobs_submitted {summary['jobs_submitted']:,})" in result.stderr


def test_sweep_json_quiet_and_fail_if(tmp_path, make_scenario):
    """--json prints the cells alone on stdout; --fail-if names the run and its value."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(make_scenario(
        downstream={"outages": [{"start": "500ms", "duration": "300ms"}]})))
    out = tmp_path / "sweep"
    result = invoke("sweep", str(path), "--grid", "workload.rate=20,40", "--processes", "1",
                    "--out", str(out), "--json", "--fail-if", "jobs_submitted > 0")
    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)
    assert data["tasks"] == 2 and len(data["cells"]) == 2 and data["axes"] == ["workload.rate"]
    assert sum(sum(row.values()) for row in data["counts"].values()) == 2
    assert "holds for exponential workload.rate=20" in result.stderr
    again = invoke("sweep", str(path), "--grid", "workload.rate=20,40", "--processes", "1",
                   "--out", str(out), "--quiet")
    assert again.exit_code == 0 and again.stdout == ""

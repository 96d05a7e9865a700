"""Every number shown with its definition at hand: the registry's definitions on the command
line (``herdsim kpis``, ``--explain``, a failed ``--fail-if``), and peaks stated in the
window they were measured in on every surface (issue 22)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import herdsim
from herdsim.analysis.kpis import BY_KEY, REGISTRY, on
from herdsim.cli import app
from herdsim.outputs.report.page import render


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, make_scenario):
    path = tmp_path_factory.mktemp("defs") / "tiny.yaml"
    path.write_text(yaml.safe_dump(make_scenario(
        peak_window="20ms", downstream={"outages": [{"start": "500ms", "duration": "300ms"}]})))
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), terminal_width=200)


def test_kpis_lists_every_definition_of_the_registry():
    result = invoke("kpis")
    assert result.exit_code == 0
    for kpi in REGISTRY:
        assert kpi.key in result.stdout


def test_kpis_names_its_keys_and_suggests_for_a_misspelt_one():
    result = invoke("kpis", "goodput", "retry_peak_to_mean")
    assert result.exit_code == 0
    assert "successes per second" in result.stdout and "ranks nothing" in result.stdout
    assert "recovery_time" not in result.stdout
    wrong = invoke("kpis", "goodpt")
    assert wrong.exit_code == 2 and "did you mean goodput?" in wrong.stderr


@pytest.mark.slow
def test_explain_defines_every_number_the_run_table_shows(scenario, tmp_path):
    result = invoke("run", str(scenario), "--out", str(tmp_path / "o"), "--explain")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    shown = [kpi.key for kpi in on("run") if kpi.listed(summary)]
    definitions = result.stdout.split("Definitions")[1]
    for key in shown:
        assert f" {key} " in definitions, key
    assert "Definitions" not in invoke("run", str(scenario), "--out",
                                       str(tmp_path / "p")).stdout


@pytest.mark.slow
def test_a_failed_fail_if_prints_the_value_and_the_definition(scenario, tmp_path):
    result = invoke("run", str(scenario), "--out", str(tmp_path / "o"), "--quiet",
                    "--fail-if", "peak_calls >= 0")
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert lines[0].startswith("fail-if peak_calls >= 0: holds for tiny (peak_calls ")
    assert lines[1].strip() == BY_KEY["peak_calls"].definition({"peak_window": 0.02})
    assert "peak calls in 20ms" in lines[1]


@pytest.mark.slow
def test_no_surface_scales_a_peak_to_a_second(scenario, tmp_path):
    """The run table states the peak as calls in its 20 ms window and shows no calls/s
    peak; no table, column or report heading of the registry names the scaled one; the
    summary keeps peak_attempt_rate = peak_calls / peak_window for older readers."""
    result = invoke("run", str(scenario), "--out", str(tmp_path / "o"))
    assert "peak calls in 20ms" in result.stdout and "peak in 20ms / capacity" in result.stdout
    assert "peak call rate" not in result.stdout
    for surface in ("run", "report", "compare", "figure"):
        keys = [kpi.key for kpi in on(surface)]
        assert "peak_attempt_rate" not in keys and "retry_peak_to_mean" not in keys
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["peak_attempt_rate"] * summary["peak_window"] == pytest.approx(
        summary["peak_calls"])
    comparison = herdsim.compare(herdsim.load_scenario(scenario), ["fixed", "full_jitter"],
                                 processes=1, progress=False)
    assert "20ms peak/cap ×" in comparison.table().columns
    page = render(comparison)
    assert "peak calls in 20ms" in page and "calls/s in" not in page


def test_retry_peak_to_mean_has_no_better_direction():
    """A peak over the arm's own mean cannot rank arms (fixed 6.7 reads smoother than
    full jitter 9.7 on outage.yaml): no direction, so no surface ranks by it."""
    assert BY_KEY["retry_peak_to_mean"].better is None

"""``herdsim predict``: the fluid model's outputs, marked as predicted, and its refusals."""

from __future__ import annotations

import json

import pytest
from conftest import tiny
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.errors import ScenarioError


def test_predict_writes_a_runs_layout_marked_as_predicted(tmp_path, scenarios_dir):
    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "metastable.yaml"),
                                    "--out", str(out), "--json"])
    assert said.exit_code == 0, said.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["predicted"] == "fluid model"
    assert {"timeseries.csv", "summary.json", "scenario.yaml", "peak_rate.csv",
            "timeline.png"} <= {p.name for p in out.iterdir()}
    # the scenario's own comment: the slowdown keeps it down without a budget
    assert summary["state"] == "metastable"


@pytest.mark.parametrize(("changes", "named"), [
    ({"breaker": {"enabled": True, "window_calls": 50}}, "breaker"),
    ({"retry": {"strategy": "decorrelated_jitter"}}, "retry.strategy"),
    ({"budget": {"kind": "ratio", "scope": "worker"}}, "budget"),
])
def test_a_mechanism_without_a_fluid_form_is_refused_naming_it(tmp_path, changes, named):
    with pytest.raises(ScenarioError) as caught:
        herdsim.predict(tiny(**changes))
    assert named in str(caught.value) and "predict cannot represent" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("strategy", ["decorrelated_jitter", "decorrelated_jitter_v2"])
def test_a_strategy_without_a_sleep_distribution_is_refused_naming_it_and_its_field(
        tmp_path, scenarios_dir, strategy):
    """Decorrelated jitter's sleep depends on the previous one: no cdf per retry, so the
    fluid model has nothing to read; the one line names the member and the field."""
    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "metastable.yaml"),
                                    "--set", f"retry.strategy={strategy}", "--out", str(out)])
    assert said.exit_code == 2
    assert len(said.output.strip().splitlines()) == 1
    assert f"retry.strategy: herdsim predict cannot represent the '{strategy}'" in said.output
    assert not out.exists()


def test_the_cli_refuses_in_one_line_with_exit_2_and_leaves_nothing(tmp_path,
                                                                     scenarios_dir):
    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "layers.yaml"),
                                    "--out", str(out)])
    assert said.exit_code == 2
    assert len(said.output.strip().splitlines()) == 1
    assert "layers.yaml: downstream.name:" in said.output and "call graph" in said.output
    assert not out.exists()


def test_a_model_beyond_the_budget_is_refused_before_it_allocates(tmp_path, scenarios_dir):
    """30 days on a 2 ms grid: 1.3 billion steps, hundreds of GB: refused in one line."""
    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "outage.yaml"),
                                    "--set", "duration=720h", "--out", str(out)])
    assert said.exit_code == 2
    assert len(said.output.strip().splitlines()) == 1 and "steps" in said.output
    assert not out.exists()


def test_the_table_is_runs_table_with_the_predicted_rows_marked(tmp_path, scenarios_dir):
    """Every row the registry's run table lists, under the registry's label (no label of
    its own, none twice), the mean flow's and the bunched peak marked †; the outage's
    recovery read as one (not 'no outage')."""
    from herdsim.analysis.kpis import BY_KEY
    from herdsim.cli.tables import shown_keys

    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "outage.yaml"),
                                    "--out", str(out)], terminal_width=200)
    assert said.exit_code == 0, said.output
    summary = json.loads((out / "summary.json").read_text())
    rows = [line.split("│")[1].strip() for line in said.stdout.splitlines()
            if line.startswith("│")]
    labels = [BY_KEY[key].title(summary) for key in shown_keys(summary)]
    assert [row.removesuffix(" †") for row in rows] == labels
    assert len(set(labels)) == len(labels)
    marked = {row.removesuffix(" †") for row in rows if row.endswith(" †")}
    assert marked == {BY_KEY[key].title(summary) for key in
                      ("peak_calls_mean", "peak_calls", "peak_to_capacity")}
    assert {"succeeded fraction", "downstream calls", "dead-lettered"} <= set(labels)
    assert "not recovered within the run" in said.stdout and "no outage" not in said.stdout


def test_near_threshold_is_said_under_the_table_and_explain_defines_every_row(
        tmp_path, scenarios_dir):
    from herdsim.cli.tables import shown_keys

    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "admission.yaml"),
                                    "--set", "retry.strategy=grpc_connect", "--out",
                                    str(out), "--explain"], terminal_width=200)
    assert said.exit_code == 0, said.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["state"] == "near threshold"
    text = " ".join(said.stdout.split())
    assert "near threshold, so no state is claimed: " + summary["near_threshold"] in text
    definitions = said.stdout.split("Definitions")[1]
    for key in shown_keys(summary):
        assert f" {key} " in definitions, key

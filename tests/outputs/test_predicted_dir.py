"""A ``herdsim predict`` directory read back by every reader of output directories
(herdsim/outputs/predicted_dir.py): its counts are mean amounts, and the report, the
figures and the export it feeds say predicted wherever a number appears."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.outputs import reading
from herdsim.outputs.compare_dir import load_outputs

NEAR_CASE = ("admission.yaml", "retry.strategy=grpc_connect")  # docs/validation.md §7


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), terminal_width=200)


@pytest.fixture(scope="module")
def predicted(tmp_path_factory, scenarios_dir):
    """admission under grpc_connect, predicted: near threshold (docs/predict.md)."""
    out = tmp_path_factory.mktemp("predicted") / "p"
    said = invoke("predict", str(scenarios_dir / NEAR_CASE[0]), "--set", NEAR_CASE[1],
                  "--out", str(out), "-q")
    assert said.exit_code == 0, said.output
    return out


def test_it_reads_back_as_the_prediction_it_saved(predicted):
    summary = json.loads((predicted / "summary.json").read_text())
    c = load_outputs(predicted)
    assert c.predicted == summary["predicted"] == "fluid model"
    assert c.drawable == ("timeline",)
    run = c.runs.iloc[0]
    assert run["state"] == summary["state"] == "near threshold"
    assert run["jobs_succeeded"] == pytest.approx(summary["jobs_succeeded"])
    # mean amounts, read as they are: a count that is no whole number is kept
    assert (c.timeseries[["attempts", "success", "retry"]] % 1 != 0).any().any()


@pytest.mark.parametrize("mean", [0.5, 155672.8])
def test_a_fractional_count_passes_only_in_a_prediction(mean):
    """A run's summary with a fractional count is damaged; a prediction's holds means.
    The near-threshold state is a prediction's only."""
    run = {"scenario": "s", "jobs_succeeded": mean}
    assert "whole number" in reading.summary_problem(run)
    assert reading.summary_problem({**run, "predicted": "fluid model"}) is None
    near = {"scenario": "s", "state": "near threshold"}
    assert "one of recovered" in reading.summary_problem(near)
    assert reading.summary_problem({**near, "predicted": "fluid model"}) is None


def test_plot_redraws_the_timeline_alone(predicted):
    said = invoke("plot", str(predicted))
    assert said.exit_code == 0, said.output
    assert "timeline.png" in said.output
    assert not any((predicted / f"{kind}.png").exists() for kind in ("landing", "sleeps"))
    refused = invoke("plot", str(predicted), "--kinds", "sleeps,landing")
    assert refused.exit_code == 2
    assert len(refused.output.strip().splitlines()) == 1
    assert "a prediction draws only timeline" in refused.output


def test_the_report_says_predicted_and_why_no_state_is_claimed(predicted):
    said = invoke("report", str(predicted))
    assert said.exit_code == 0, said.output
    page = (predicted / "report.html").read_text()
    assert "<h1>herdsim report: admission — predicted (fluid model)</h1>" in page
    verdict = page.split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    assert verdict.count("Predicted by the fluid model, not simulated") == 1
    assert "Near threshold, so no state is claimed: the busiest 100 ms holds" in verdict
    numbers = page.split("<h2>Key numbers</h2>")[1].split("<h2>")[0]
    assert "Predicted by the fluid model (herdsim predict), not simulated" in numbers
    # nothing a fluid has not got: no seed, no retries landing, no sleeps or landing figure
    assert "seed" not in page.split("<h2>Verdict</h2>")[0]
    assert "hs-canvas" not in page and 'alt="sleeps"' not in page
    assert 'alt="landing"' not in page and 'alt="timeline"' in page


def test_the_export_labels_every_series_predicted(predicted):
    said = invoke("export", "prometheus", str(predicted))
    assert said.exit_code == 0, said.output
    samples = [line for line in (predicted / "metrics.om").read_text().splitlines()
               if line and not line.startswith("#")]
    assert samples and all('predicted="fluid model"' in line for line in samples)
    assert not any(re.match(r"worker_retry_sleep", line) for line in samples)

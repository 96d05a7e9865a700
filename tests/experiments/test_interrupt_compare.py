"""Ctrl-C during a comparison keeps the arms that finished, whole, as a complete
comparison of those arms marked as such; an arm is saved entirely or not at all."""

from __future__ import annotations

import json

import pandas.testing as pd_testing
import pytest
import yaml
from conftest import tiny
from typer.testing import CliRunner

from herdsim import load_scenario
from herdsim.cli import app
from herdsim.experiments import compare as compare_module
from herdsim.outputs.compare_dir import load_outputs, save_comparison


@pytest.fixture
def stop_at_task(monkeypatch):
    """Ctrl-C when the (serial) comparison reaches task number *n*."""
    def arm(n: int) -> None:
        real, calls = compare_module._simulate, []

        def simulate(task):
            calls.append(task)
            if len(calls) > n:
                raise KeyboardInterrupt
            return real(task)
        monkeypatch.setattr(compare_module, "_simulate", simulate)
    return arm


@pytest.mark.slow
def test_finished_arms_survive_ctrl_c_whole(stop_at_task, tmp_path):
    """Three arms x two replications, interrupted at the fourth run: the first arm (two
    runs) is whole, the second has one run of two and is left out with the third."""
    stop_at_task(3)
    sc = load_scenario(tiny())
    with pytest.raises(compare_module.Interrupted) as stopped:
        compare_module.compare(sc, ["fixed", "exponential", "full_jitter"], replications=2,
                               processes=1, progress=False)
    partial = stopped.value.comparison
    assert [a.label for a in partial.arms] == ["fixed"]
    assert partial.unfinished == ["exponential", "full_jitter"]
    assert sorted(partial.runs["replication"]) == [0, 1]
    assert set(partial.timeseries["arm"]) == {"fixed"}
    saved = load_outputs(save_comparison(partial, tmp_path / "out", ["png"]))
    assert saved.unfinished == partial.unfinished and "interrupted" in repr(saved)


def test_ctrl_c_before_any_arm_finished_writes_nothing(stop_at_task, tmp_path):
    stop_at_task(0)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", "--strategies", "fixed,exponential",
                                      "--processes", "1", "--out", str(out),
                                      "--format", "png", "-q", _scenario(tmp_path)])
    assert result.exit_code == 130 and not out.exists()


@pytest.mark.slow
def test_the_cli_saves_the_finished_arms_and_says_so(stop_at_task, tmp_path):
    stop_at_task(1)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", "--strategies", "fixed,exponential",
                                      "--processes", "1", "--out", str(out), "-q",
                                      _scenario(tmp_path)])
    assert result.exit_code == 130, result.output
    meta = json.loads((out / "arms.json").read_text())
    assert [a["label"] for a in meta["arms"]] == ["fixed"]
    assert meta["unfinished"] == ["exponential"]
    assert "1 finished arm saved" in result.output


def _scenario(tmp_path) -> str:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny()))
    return str(path)


@pytest.mark.slow
def test_a_large_sleeps_table_is_parquet_and_reads_back_the_same(monkeypatch, tmp_path):
    """Beyond LARGE_TABLE rows the sleeps go to sleeps.parquet (no sleeps.csv); every
    reader (the directory loader, the OpenMetrics export) takes it as the CSV."""
    from herdsim.outputs import compare_dir, openmetrics

    c = compare_module.compare(load_scenario(tiny()), ["fixed"], processes=1, progress=False)
    monkeypatch.setattr(compare_dir, "LARGE_TABLE", len(c.sleeps) - 1)
    out = save_comparison(c, tmp_path / "out", ["png"])
    assert (out / "sleeps.parquet").is_file() and not (out / "sleeps.csv").exists()
    back = load_outputs(out)
    pd_testing.assert_frame_equal(back.sleeps.reset_index(drop=True),
                                  c.sleeps.reset_index(drop=True), check_dtype=False)
    assert openmetrics.export(out).samples > 0

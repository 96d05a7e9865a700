"""Resume with a trust model: a task file counts only when it matches its cell's
identity (as the sweep's own plan runs it) and its outcomes add up; any other is
recomputed, and the sweep says so."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from conftest import tiny

from herdsim.experiments import sweep
from herdsim.outputs import sweep_dir


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    (folder / "s.yaml").write_text(yaml.safe_dump(tiny()))
    planned = sweep.plan(folder / "s.yaml", ["workers.count=2,3"],
                         ["exponential", "full_jitter"], replications=2)
    out = sweep.run_sweep(planned, folder / "sw", processes=1, progress=False)
    return planned, out


def _rows(out) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / sweep_dir.TASKS).glob("*.json")}


def _forgeries(row: dict) -> dict[str, dict]:
    """Edits of one genuine row, each a row this task cannot have written."""
    submitted = row["jobs_submitted"]
    other = "full_jitter" if row["strategy"] == "exponential" else "exponential"
    more = 10 ** 6
    return {
        "succeeded beyond submitted": {**row, "jobs_succeeded": more},
        "another strategy": {**row, "strategy": other},
        "another seed": {**row, "seed": row["seed"] + 100},
        "another strategy and seed": {**row, "strategy": other, "seed": row["seed"] + 1},
        "more jobs than the workload": {  # consistent in itself, impossible for the run
            **row, "jobs_submitted": submitted + more,
            "jobs_succeeded": row["jobs_succeeded"] + more,
            "succeeded_fraction": (row["jobs_succeeded"] + more) / (submitted + more)},
        "a fraction not its own": {**row, "succeeded_fraction": 0.0 if row[
            "jobs_succeeded"] else 1.0},
        "another scenario": {**row, "scenario": "other"},
    }


def test_every_genuine_task_file_proves_its_task(finished):
    planned, out = finished
    assert sweep_dir.finished(out, planned.identity) == set(_rows(out))
    assert sweep_dir.refused(out, planned.identity) == []
    for task, row in _rows(out).items():  # the plan's identity is what the runs said
        cell, arm, replication = (int(part[1:]) for part in task.split("-"))
        identity = planned.identity(cell, arm, replication)
        assert row["jobs_submitted"] <= identity.pop("max_jobs")
        assert {key: row[key] for key in identity} == identity


@pytest.mark.parametrize("kind", list(_forgeries({"jobs_submitted": 1, "jobs_succeeded": 1,
                                                  "strategy": "exponential", "seed": 1})))
def test_a_forged_task_file_is_recomputed_and_said(finished, tmp_path, kind, capsys):
    planned, out = finished
    copy = tmp_path / "sw"
    import shutil

    shutil.copytree(out, copy)
    name = sorted(_rows(copy))[3]
    genuine = _rows(copy)[name]
    forged = _forgeries(genuine)[kind]
    (copy / sweep_dir.TASKS / f"{name}.json").write_text(json.dumps(forged))
    assert name not in sweep_dir.finished(copy, planned.identity)
    refused = sweep_dir.refused(copy, planned.identity)
    assert [task for task, _ in refused] == [f"tasks/{name}.json"]
    sweep.run_sweep(planned, copy, processes=1, progress=True)
    assert "1 task file(s) do not prove their task and are recomputed" in \
        capsys.readouterr().err
    assert _rows(copy)[name] == {**genuine, "wall_seconds": _rows(copy)[name]["wall_seconds"],
                                 "calls_per_wall_second":
                                     _rows(copy)[name]["calls_per_wall_second"]}
    table = pd.read_csv(copy / "sweep.csv").set_index("task")
    assert table.loc[name, "jobs_succeeded"] == genuine["jobs_succeeded"]
    assert table.loc[name, "strategy"] == genuine["strategy"]

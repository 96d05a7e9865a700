"""Sweeps: grid syntax, one task per cell x strategy x replication, the same table from
every executor, resumable output, refusal to mix sweeps, and the CLI's errors.

Budget: about 10 s, most of it starting one in-process Dask cluster for the module.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import tiny
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.config.scenario import Scenario
from herdsim.errors import SweepError
from herdsim.experiments import sweep as sweeps
from herdsim.experiments.parallel import AHEAD, imap_unordered
from herdsim.experiments.sweep import parse_grid, plan, run_sweep
from herdsim.outputs import sweep_dir

WALL_CLOCK = ["wall_seconds", "calls_per_wall_second"]  # the only columns allowed to differ
GRID = ["downstream.outages.0.duration=100ms,300ms", "workload.rate=40:60:2"]
STRATEGIES = ["exponential", "full_jitter"]


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory):
    """A 3 s scenario with a short outage: each run takes a few tens of milliseconds."""
    path = tmp_path_factory.mktemp("scenario") / "tiny.yaml"
    data = tiny(duration="3s", downstream={"outages": [{"start": "1s", "duration": "200ms"}]})
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def small(scenario_file):
    """2 x 2 cells x 2 strategies x 2 replications = 16 tasks."""
    return plan(scenario_file, GRID, STRATEGIES, replications=2)


@pytest.fixture(scope="module")
def dask_scheduler():
    """One in-process Dask cluster (2 single-thread workers) for the whole module."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def serial_table(small, tmp_path_factory):
    out = run_sweep(small, tmp_path_factory.mktemp("serial") / "sweep", processes=1,
                    progress=False)
    return pd.read_parquet(out / "sweep.parquet")


# --- grid syntax -------------------------------------------------------------------------

def test_list_keeps_values_as_given():
    assert parse_grid("workload.rate=1000, 2000,4000") == sweeps.Axis(
        "workload.rate", ("1000", "2000", "4000"))


def test_duration_range_is_in_seconds():
    axis = parse_grid("downstream.outages.0.duration=1s:20s:5")
    assert axis.values == pytest.approx([1, 5.75, 10.5, 15.25, 20])


def test_log_range_of_durations():
    assert parse_grid("x=250ms:16s:7:log").values == pytest.approx([0.25 * 2**k
                                                                   for k in range(7)])


def test_whole_number_ends_give_whole_numbers():
    values = parse_grid("workers.count=100:1000:4:log").values
    assert values == (100, 215, 464, 1000)
    assert all(isinstance(v, int) for v in values)


@given(start=st.floats(0.01, 1e4), span=st.floats(0.01, 1e4), n=st.integers(2, 30))
def test_ranges_are_evenly_spaced(start, span, n):
    """Linear ranges have equal steps, log ranges equal ratios, both hit the ends
    (to 1e-9: values are kept to 12 significant digits)."""
    stop = start + span
    linear = np.array(parse_grid(f"x={start!r}s:{stop!r}s:{n}").values)
    log = np.array(parse_grid(f"x={start!r}s:{stop!r}s:{n}:log").values)
    for values in (linear, log):
        assert len(values) == n
        assert values[0] == pytest.approx(start, rel=1e-9)
        assert values[-1] == pytest.approx(stop, rel=1e-9)
    # values are rounded to 12 significant digits, hence the absolute tolerance
    assert np.diff(linear) == pytest.approx(np.full(n - 1, span / (n - 1)), abs=1e-10 * stop)
    ratio = (stop / start) ** (1 / (n - 1))
    assert log[1:] / log[:-1] == pytest.approx(np.full(n - 1, ratio), rel=1e-6)


@pytest.mark.parametrize("spec, problem", [
    ("workload.rate", "expected path="),
    ("workload.rate=", "expected path="),
    ("workload.rate=1,,2", "empty value"),
    ("workload.rate=1,1", "listed twice"),
    ("workload.rate=1:9", "start:stop:n"),
    ("workload.rate=1:9:3:cubic", "start:stop:n"),
    ("workload.rate=1:9:1", "at least 2"),
    ("workload.rate=1:9:x", "at least 2"),
    ("workload.rate=one:9:3", "neither a number nor a duration"),
    ("workload.rate=0:9:3:log", "positive ends"),
    ("workload.rate=1:3:5", "whole numbers do not fit"),
])
def test_bad_grid_names_the_problem(spec, problem):
    with pytest.raises(SweepError, match=problem):
        parse_grid(spec)


def test_unit_of_a_field():
    assert sweeps.unit_of("downstream.outages.0.duration") == "s"
    assert sweeps.unit_of("downstream.timeout") == "s"  # an optional duration
    assert sweeps.unit_of("workload.rate") is None


# --- planning ----------------------------------------------------------------------------

def test_every_cell_strategy_and_replication_is_one_task(small):
    tasks = list(small.tasks())
    assert small.n_cells == 4 and small.n_tasks == len(tasks) == 16
    assert len({t.id for t in tasks}) == 16
    keys = {(t.cell, t.scenario["retry"]["strategy"], t.replication) for t in tasks}
    assert keys == set(itertools.product(range(4), STRATEGIES, range(2)))


def test_replication_seeds_are_shared_across_cells_and_strategies(small):
    """Common random numbers: replication r runs with seed + r everywhere."""
    base_seed = small.base["seed"]
    for task in small.tasks():
        assert task.scenario["seed"] == base_seed + task.replication


def test_cells_are_resolved_and_applied(small):
    for task in small.tasks():
        sc = task.scenario
        assert task.keys == {"downstream.outages.0.duration": sc["downstream"]["outages"][0]
                             ["duration"], "workload.rate": sc["workload"]["rate"]}
    assert small.resolved == [(0.1, 0.3), (40.0, 60.0)]


def test_digest_depends_on_meaning_not_spelling(scenario_file, small):
    same = plan(scenario_file, ["downstream.outages.0.duration=0.1,300ms",
                                "workload.rate=40,60.0"], STRATEGIES, replications=2)
    other = plan(scenario_file, GRID, STRATEGIES, replications=3)
    assert same.manifest()["digest"] == small.manifest()["digest"]
    assert other.manifest()["digest"] != small.manifest()["digest"]


@pytest.mark.parametrize("grid, strategies, sets, problem", [
    (["downstream.outage.0.duration=1s"], [], None, "did you mean 'outages'"),
    (["downstream.outages.0.duration=1s,5s"], [], None, r"after the run's end.*in the cell"),
    (["retry.strategy=fixed"], [], None, "--strategies"),
    (["workload.rate=10", "workload.rate=20"], [], None, "given twice"),
    (["workload.rate=10"], [], {"workload.rate": "20"}, "also given with --set"),
    (["workload.rate=100,1e2"], [], None, "mean the same"),
    (["downstream.service={}"], [], None, "names a section"),
    ([], ["exponential", "exponential"], None, "listed twice"),
])
def test_invalid_sweeps_are_refused_before_running(scenario_file, grid, strategies, sets,
                                                   problem):
    with pytest.raises(SweepError, match=problem):
        plan(scenario_file, grid, strategies, sets=sets)


# --- executors ---------------------------------------------------------------------------

def test_serial_table_has_every_task_in_order(serial_table, small):
    assert list(serial_table["task"]) == sorted(t.id for t in small.tasks())
    assert serial_table["jobs_submitted"].gt(0).all()


def test_strategies_share_arrivals(serial_table):
    """Common random numbers: in a cell and replication, every strategy sees the same jobs."""
    per_arm = serial_table.groupby(["cell", "replication"])["jobs_submitted"].nunique()
    assert (per_arm == 1).all()
    assert serial_table.groupby("cell")["jobs_submitted"].nunique().gt(1).any()


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_executors_give_the_same_table(executor, small, serial_table, tmp_path, request):
    options = {"processes": 2}
    if executor == "dask":
        options["scheduler"] = request.getfixturevalue("dask_scheduler")
    out = run_sweep(small, tmp_path / "sweep", progress=False, **options)
    table = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(table.drop(columns=WALL_CLOCK),
                                  serial_table.drop(columns=WALL_CLOCK))
    csv = pd.read_csv(out / "sweep.csv")
    assert list(csv["task"]) == list(table["task"])


@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_submission_runs_at_most_a_window_ahead(executor, request):
    """The driver reads the tasks lazily: flat memory however many tasks there are."""
    consumed = []

    def args():
        for i in range(40):
            consumed.append(i)
            yield i

    scheduler = request.getfixturevalue("dask_scheduler") if executor == "dask" else None
    results = imap_unordered(abs, args(), processes=2, scheduler=scheduler, total=40)
    first = next(results)
    assert len(consumed) <= AHEAD * 2 + 1
    assert sorted([first, *results]) == [(i, i) for i in range(40)]


# --- resuming and refusing ---------------------------------------------------------------

def test_resume_runs_only_the_missing_tasks(small, tmp_path, monkeypatch):
    out = run_sweep(small, tmp_path / "sweep", processes=1, progress=False)
    before = pd.read_parquet(out / "sweep.parquet")
    removed = sorted((out / "tasks").glob("*.json"))[3::5]
    kept = {p: p.read_text() for p in (out / "tasks").glob("*.json") if p not in removed}
    for path in removed:
        path.unlink()
    (out / "sweep.parquet").unlink()
    ran = []
    real = sweeps.run_task
    monkeypatch.setattr(sweeps, "run_task", lambda task: ran.append(task.id) or real(task))
    run_sweep(small, out, processes=1, progress=False)
    assert sorted(ran) == sorted(p.stem for p in removed)
    assert all(p.read_text() == text for p, text in kept.items())
    after = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(after.drop(columns=WALL_CLOCK),
                                  before.drop(columns=WALL_CLOCK))


def prepare(out, sweep):
    """Create the sweep directory *out* as ``run_sweep`` does before its first task."""
    sweep_dir.prepare(out, sweep.manifest(), Scenario.model_validate(sweep.base).to_yaml())


def test_a_changed_scenario_is_not_mixed_in(scenario_file, small, tmp_path):
    out = tmp_path / "sweep"
    prepare(out, small)
    manifest = (out / "manifest.json").read_text()
    changed = plan(scenario_file, GRID, STRATEGIES, replications=2,
                   sets={"downstream.concurrency": "5"})
    with pytest.raises(SweepError, match="another sweep.*new --out"):
        run_sweep(changed, out, processes=1, progress=False)
    assert (out / "manifest.json").read_text() == manifest
    assert not list((out / "tasks").iterdir())


def test_a_non_sweep_directory_is_refused(small, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SweepError, match="not a sweep directory"):
        prepare(tmp_path, small)


def test_unfinished_sweep_cannot_be_loaded(small, tmp_path):
    prepare(tmp_path / "s", small)
    with pytest.raises(SweepError, match=r"not finished \(0 of 16"):
        sweep_dir.load_sweep(tmp_path / "s")


def test_manifest_records_the_sweep(small, tmp_path):
    prepare(tmp_path / "s", small)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["tasks"] == 16 and manifest["strategies"] == STRATEGIES
    assert [a["unit"] for a in manifest["axes"]] == ["s", None]
    assert [a["given"] for a in manifest["axes"]] == [["100ms", "300ms"], ["40", "60"]]


# --- the command line --------------------------------------------------------------------

@pytest.mark.parametrize("args, problem", [
    (["--grid", "workload.rate=1:9:1"], "at least 2"),
    (["--grid", "downstream.outages.0.duration=1s,5s"], "after the run's end"),
    (["--strategies", "exponential,nope"], "unknown strategy 'nope'"),
    (["--replications", "0"], "at least 1"),
    (["--scheduler", "tcp://127.0.0.1:1", "--grid", "workload.rate=nope"], "workload.rate"),
])
def test_cli_rejects_bad_input_with_exit_2_and_writes_nothing(scenario_file, tmp_path, args,
                                                              problem):
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["sweep", str(scenario_file), *args, "--out", str(out)])
    assert done.exit_code == 2
    assert problem in done.output and "Traceback" not in done.output
    assert not out.exists()


def test_cli_runs_and_resumes(scenario_file, tmp_path):
    args = ["sweep", str(scenario_file), "--grid", "workload.rate=40,60", "--processes", "1",
            "--out", str(tmp_path / "out")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "2 tasks" in first.output and "0 already done" in first.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "2 already done" in again.output
    assert len(pd.read_csv(tmp_path / "out" / "sweep.csv")) == 2


def test_cli_cannot_reach_a_scheduler(scenario_file, tmp_path, monkeypatch):
    monkeypatch.setattr("herdsim.experiments.parallel.CONNECT_TIMEOUT", "0.5s")
    monkeypatch.setenv("HERDSIM_SCHEDULER", "tcp://127.0.0.1:1")
    done = CliRunner().invoke(app, ["sweep", str(scenario_file), "--out",
                                    str(tmp_path / "out")])
    assert done.exit_code == 2
    assert "cannot reach the Dask scheduler" in done.output
    assert not (tmp_path / "out").exists()

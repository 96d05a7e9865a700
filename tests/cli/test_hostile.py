"""Hostile input: either a clean run, or exit 2 with one line and nothing written.

Hypothesis writes scenario files (wrong types, non-finite and huge numbers, odd bytes and
encodings, duplicate keys, hostile names) and ``--set`` strings, and runs ``herdsim run``
in-process. The property: exit 0 with the output directory under the folder asked for, or
exit 2 with exactly one ``error:`` line on stderr, no traceback and no file written.
Examples pin the classes of issue 12 one by one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config.loading import load_scenario
from herdsim.errors import CapacityError, OutputDirError, ScenarioError, StrategyError
from herdsim.experiments.sweep import plan, run_task
from herdsim.outputs import atomic, openmetrics, sweep_dir
from herdsim.planning.estimate import MEMORY_SHARE, estimate, total_memory

TINY = {"name": "h", "seed": 1, "duration": "1s", "workload": {"rate": 10},
        "workers": {"count": 2}, "downstream": {"concurrency": 2,
                                                "service": {"mean": "20ms"}},
        "retry": {"max_retries": 2}}
PATHS = ["duration", "bin", "peak_window", "seed", "name", "queue", "workload.rate",
         "workload.backlog", "workload.arrivals", "workers.count", "workers.poll_interval",
         "downstream.concurrency", "downstream.timeout", "downstream.service.sigma",
         "downstream.service.mean", "downstream.overload.latency_per_call",
         "retry.base", "retry.cap", "retry.max_retries", "retry.strategy", "dlq.enabled"]
HOSTILE_TEXT = ["../../escape", "a/b/c", "/abs", "x[/]", "[bold]x", "\x1b[31mred", "x" * 300,
                ".inf", "-.inf", ".nan", "1e308", "1e308s", "-1", "0", "true", "null", "[1,",
                "{a: 1, a: 2}", "1us", "500us", "", " ", "é", "\x00", "os:system",
                "herdsim.policies.backoff:Fixed", "!!python/object:os.system"]
NUMBERS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0, 1e9 + 1, 0.05, 3,
           -1, 0, 2**31, 2**63, 2**70, -2**70]  # extremes (a mid-sized value is a valid run)
VALUES = st.one_of(
    st.sampled_from(NUMBERS),
    st.booleans(), st.none(), st.sampled_from(HOSTILE_TEXT), st.text(max_size=8),
    st.lists(st.integers(0, 3), max_size=2))

runner = CliRunner()


def run_cli(tmp: Path, *args: str):
    """``herdsim *args`` in *tmp*; returns the result and the files it left beyond *args*."""
    before = set(tmp.rglob("*"))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        result = runner.invoke(app, list(args), catch_exceptions=True)
    finally:
        os.chdir(cwd)
    return result, set(tmp.rglob("*")) - before


def assert_clean(result, new: set[Path], out: Path) -> str:
    """Exit 0 and *out* written under tmp, or exit 2, one error line, nothing written."""
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    if result.exit_code == 0:
        assert out.is_dir() and all(out in path.parents or path == out for path in new)
        return "ran"
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()  # one line per problem, each naming it
    assert lines and all(line.startswith("error: ") for line in lines), result.stderr
    assert "Traceback" not in result.output
    assert not new, new
    assert "\x1b" not in result.stderr  # control characters never reach the terminal
    return "refused"


def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return doc


ENCODINGS = st.sampled_from(["utf-8", "utf-16", "latin-1", "cp1252", "binary", "bom"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=VALUES, encoding=ENCODINGS,
       duplicate=st.booleans())
def test_any_scenario_file_runs_cleanly_or_is_refused_in_one_line(
        tmp_path_factory, path, value, encoding, duplicate):
    tmp = tmp_path_factory.mktemp("file")
    text = yaml.safe_dump(_set(TINY, path, value), allow_unicode=True)
    if duplicate:
        text += "seed: 2\n"  # a key given twice
    data = {"utf-8": lambda t: t.encode(), "utf-16": lambda t: t.encode("utf-16"),
            "latin-1": lambda t: (t + "description: café\n").encode("latin-1", "replace"),
            "cp1252": lambda t: (t + "description: “x”\n").encode("cp1252", "replace"),
            "binary": lambda t: bytes(range(256)) + t.encode(),
            "bom": lambda t: b"\xef\xbb\xbf" + t.encode()}[encoding](text)
    (tmp / "s.yaml").write_bytes(data)
    result, new = run_cli(tmp, "run", "s.yaml", "--out", "out")
    outcome = assert_clean(result, new, tmp / "out")
    if duplicate or encoding in ("utf-16", "binary"):
        assert outcome == "refused"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(sets=st.lists(st.tuples(st.sampled_from(PATHS + ["no.such", "a..b", ""]),
                               st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=6))),
                     min_size=1, max_size=3))
@pytest.mark.slow
def test_any_set_string_runs_cleanly_or_is_refused_in_one_line(tmp_path_factory, sets):
    tmp = tmp_path_factory.mktemp("set")
    (tmp / "s.yaml").write_text(yaml.safe_dump(TINY))
    args = [arg for key, value in sets for arg in ("--set", f"{key}={value}")]
    result, new = run_cli(tmp, "run", "s.yaml", *args)
    assert_clean(result, new, tmp / "runs")  # a default output lands under runs/


# -- the classes of issue 12, one example each -------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    ({"workload": {"rate": float("inf")}}, "workload.rate"),
    ({"workload": {"rate": 1e308}}, "workload.rate"),
    ({"workload": {"rate": True}}, "workload.rate"),
    ({"duration": "1e308s"}, "duration"),
    ({"downstream": {"service": {"distribution": "lognormal", "sigma": 1e308}}},
     "downstream.service.sigma"),
    ({"downstream": {"overload": {"latency_per_call": 1e308}}},
     "downstream.overload.latency_per_call"),
    ({"bin": "500us"}, "bin"), ({"bin": "2s"}, "bin"), ({"queue": ""}, "queue"),
    ({"name": "../../tmp/escape"}, "name"), ({"name": "x" * 300}, "name"),
    ({"name": "a\x1b[2J"}, "name"),
])
def test_absurd_values_are_refused_naming_the_field(change, field):
    doc = copy.deepcopy(TINY)
    for key, value in change.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    if "service" in change.get("downstream", {}):
        doc["downstream"]["service"] = change["downstream"]["service"]
    with pytest.raises(ScenarioError) as caught:
        load_scenario(doc)
    assert caught.value.problems[0][0] == field
    assert len(str(caught.value).splitlines()) == 1 and len(str(caught.value)) < 300


def test_a_run_that_cannot_fit_is_refused_with_its_estimate_unless_forced():
    sc = load_scenario(_set(TINY, "workload.rate", 1_000_000) | {"duration": "1h"})
    guess = estimate(sc)
    assert guess.jobs == pytest.approx(3.6e9) and guess.bytes > MEMORY_SHARE * total_memory()
    with pytest.raises(CapacityError, match="3,600,000,000 jobs"):
        herdsim.run(sc)
    small = load_scenario(TINY)
    result = herdsim.run(small)  # the estimate bounds what a run really records
    assert len(result.jobs) <= 1.5 * estimate(small).jobs + 10
    assert result.attempt_times.size <= estimate(small).calls + 10


def test_a_sweep_refuses_a_cell_that_cannot_fit_unless_forced(tmp_path):
    """The sweep is refused while it is planned, before anything runs; --force reaches
    every task of it, and is no part of what the sweep is (its digest): the same sweep
    resumes with or without it."""
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(TINY | {"duration": "1h"}))
    grid = ["workload.rate=1000000,2000000"]
    with pytest.raises(CapacityError, match="jobs"):
        plan(path, grid)
    forced = plan(path, grid, force=True)
    unforced = plan(path, ["workload.rate=1,2"])
    assert unforced.manifest()["digest"] == plan(path, ["workload.rate=1,2"],
                                                 force=True).manifest()["digest"]
    assert {task.force for task in unforced.tasks()} == {False}
    assert {task.force for task in forced.tasks()} == {True}
    with pytest.raises(CapacityError, match="jobs"):
        run_task(dataclasses.replace(next(forced.tasks()), force=False))


class Hostile:
    """A user's strategy whose sleeps are set per test."""

    value: object = 0.1
    fail_init = False

    def __init__(self, base, cap):
        if Hostile.fail_init:
            raise RuntimeError("boom in init")

    def sleep(self, attempt, prev, rng):
        if Hostile.value == "raise":
            raise KeyError("boom in sleep")
        return Hostile.value


OUTAGE = _set(_set(TINY, "downstream.outages", [{"start": "0.2s", "duration": "0.3s"}]),
              "retry.strategy", f"{__name__}:Hostile")


@pytest.mark.parametrize("value", [math.nan, -1.0, "0.1", np.array([0.1, 0.2]), math.inf,
                                   None, True, "raise"])
def test_a_custom_strategys_bad_sleep_is_one_line_naming_it(value, monkeypatch):
    monkeypatch.setattr(Hostile, "value", value)
    with pytest.raises(StrategyError) as caught:
        herdsim.run(load_scenario(OUTAGE))
    message = str(caught.value)
    assert "Hostile" in message and "attempt=0" in message and "\n" not in message


def test_a_custom_strategys_failing_init_is_one_line(monkeypatch):
    monkeypatch.setattr(Hostile, "fail_init", True)
    with pytest.raises(ScenarioError, match="retry.strategy: .*__init__ raised RuntimeError"):
        load_scenario(OUTAGE)


def test_built_in_strategies_are_not_wrapped_and_custom_ones_are():
    assert type(load_scenario(TINY).retry.build()).__name__ == "Exponential"
    assert type(load_scenario(OUTAGE).retry.build()).__name__ == "Checked"


@pytest.mark.slow
def test_reading_an_output_directory_never_imports_its_strategy(tmp_path):
    out = herdsim.save(herdsim.run(load_scenario(TINY)), tmp_path / "run")
    text = (out / "scenario.yaml").read_text().replace("strategy: exponential",
                                                       "strategy: evil_module_xyz:Boom")
    (out / "scenario.yaml").write_text(text)
    (out / "checksums.json").unlink()  # an edit by hand: the reader must still not import
    result, _ = run_cli(tmp_path, "validate", str(out / "scenario.yaml"))
    assert result.exit_code == 0 and "not imported" in result.stdout
    for command in (["plot", str(out), "--format", "png"], ["report", str(out)],
                    ["export", "prometheus", str(out), "--out", str(tmp_path / "m.om")]):
        result, _ = run_cli(tmp_path, *command)
        assert result.exit_code == 0, result.output
    assert "evil_module_xyz" not in __import__("sys").modules


@pytest.mark.slow
def test_damaged_output_files_are_named_in_one_line(tmp_path):
    out = herdsim.save(herdsim.run(load_scenario(TINY)), tmp_path / "run")
    lines = (out / "timeseries.csv").read_text().splitlines()
    (out / "timeseries.csv").write_text("\n".join(lines[:3]) + "\n")  # truncated
    with pytest.raises(OutputDirError, match="timeseries.csv: changed, truncated"):
        herdsim.outputs.compare_dir.load_outputs(out)
    (out / "checksums.json").unlink()  # no checksums: the row count still catches it
    with pytest.raises(OutputDirError, match="timeseries.csv: 2 rows per run .* give 10"):
        herdsim.outputs.compare_dir.load_outputs(out)
    for name, garbage, problem in [("summary.json", "{not json", "not JSON"),
                                   ("summary.json", "[1, 2]", "expected an object"),
                                   ("sleeps.csv", "time,attempt,sleep\nx,y,z\n", "non-numbers")]:
        fresh = herdsim.save(herdsim.run(load_scenario(TINY)), tmp_path / f"r{len(problem)}{name}")
        (fresh / name).write_text(garbage)
        (fresh / "checksums.json").unlink()
        result, _ = run_cli(tmp_path, "report", str(fresh))
        assert result.exit_code == 2 and name in result.stderr and problem in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_export_refuses_to_replace_a_file(tmp_path):
    out = herdsim.save(herdsim.run(load_scenario(TINY)), tmp_path / "run")
    (tmp_path / "m.om").write_text("mine\n")
    result, _ = run_cli(tmp_path, "export", "prometheus", str(out), "--out", "m.om")
    assert result.exit_code == 2 and (tmp_path / "m.om").read_text() == "mine\n"


def test_output_dir_problems_are_caught_before_simulating(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("")
    (tmp_path / "locked").mkdir(mode=0o500)
    outs = ["dangling", "file/sub", "s.yaml"] + (["locked/out"] if os.geteuid() else [])
    for out in outs:  # (root may write into a read-only folder)
        result, new = run_cli(tmp_path, "run", "s.yaml", "--out", out)
        assert result.exit_code == 2 and not new and "simulating" not in result.stdout, out


def test_two_runs_into_one_out_keep_both(tmp_path):
    result = herdsim.run(load_scenario(TINY))
    out = tmp_path / "same"
    with pytest.raises(herdsim.errors.OutputExistsError, match=r"outputs are in .*same\.1"), \
            atomic.staged_dir(out) as staging:
        staging.mkdir()
        (staging / "a").write_text("1")
        herdsim.save(result, out)  # another run lands first
    assert (out / "summary.json").is_file() and (tmp_path / "same.1" / "a").is_file()


def test_a_drawing_error_keeps_the_data(tmp_path, monkeypatch):
    from herdsim.outputs import compare_dir

    def broken(*args, **kwargs):
        raise ValueError("figure library gave up")

    monkeypatch.setattr(compare_dir, "save_figures", broken)
    with pytest.raises(herdsim.errors.FigureError, match="data is written"):
        herdsim.save(herdsim.run(load_scenario(TINY)), tmp_path / "run")
    assert (tmp_path / "run" / "timeseries.csv").is_file()
    assert compare_dir.load_outputs(tmp_path / "run").runs.shape[0] == 1


def test_durations_that_would_not_advance_the_clock_or_never_finish_are_refused():
    """A 5e-324 s poll interval once hung forever: the clock cannot advance by it."""
    with pytest.raises(ScenarioError, match="workers.poll_interval: .*below 1us"):
        load_scenario(_set(TINY, "workers.poll_interval", 5e-324))
    sc = load_scenario(_set(TINY, "workers.poll_interval", "1us") | {"duration": "1e8s"})
    assert estimate(sc).events > 1e14  # the poller alone ticks duration / poll_interval
    with pytest.raises(CapacityError, match="simulated events"):
        herdsim.run(sc)


# -- issue 23: hostile input, round 2 -------------------------------------------------------
# One section per class of the issue; each pins the root mechanism, not one example.

SAVED: dict[str, Path] = {}


def saved_run(tmp_path_factory) -> Path:
    """One tiny run folder per session, copied by each test that damages it."""
    if "run" not in SAVED:
        SAVED["run"] = herdsim.save(herdsim.run(load_scenario(OUTAGE | {
            "retry": {"max_retries": 2}})), tmp_path_factory.mktemp("saved") / "run")
    return SAVED["run"]


def damaged_copy(tmp_path_factory, unseal: bool = True) -> Path:
    copy_dir = tmp_path_factory.mktemp("damaged") / "run"
    __import__("shutil").copytree(saved_run(tmp_path_factory), copy_dir)
    if unseal:
        (copy_dir / "checksums.json").unlink()  # the value checks must stand alone
    return copy_dir


# code on read: reading resolves no strategy that is not herdsim's own, of any kind of name
@settings(max_examples=25, deadline=None)
@given(name=st.one_of(st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True),
                      st.from_regex(r"[a-z_][a-z0-9_.]{0,12}:[A-Z][a-z]{0,8}", fullmatch=True)))
def test_reading_never_resolves_a_strategy_of_any_kind(name):
    from importlib.metadata import EntryPoint

    from herdsim.policies.backoff import registry as strategies

    def refuse(*args):
        raise AssertionError("a reader resolved a strategy")

    point = EntryPoint(name, "never_imported_xyz:Boom", strategies.ENTRY_POINT_GROUP)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(strategies, "installed", lambda: {name: point})
        patch.setattr(strategies, "resolve", refuse)
        if strategies.is_own(name):
            return
        sc = load_scenario(_set(TINY, "retry.strategy", name), trust_code=False)
    assert sc.retry.strategy == name and "never_imported_xyz" not in __import__("sys").modules


def test_an_installed_strategy_in_someone_elses_folder_is_never_loaded(tmp_path_factory,
                                                                        monkeypatch):
    from importlib.metadata import EntryPoint

    from herdsim.outputs import openmetrics
    from herdsim.policies.backoff import registry as strategies

    out = damaged_copy(tmp_path_factory)
    text = (out / "scenario.yaml").read_text()
    (out / "scenario.yaml").write_text(text.replace(f"strategy: {__name__}:Hostile",
                                                    "strategy: plugin_xyz"))
    loaded = []
    point = EntryPoint("plugin_xyz", "plugin_module_xyz:Plugin", strategies.ENTRY_POINT_GROUP)
    monkeypatch.setattr(EntryPoint, "load", lambda self: loaded.append(self) or Hostile)
    monkeypatch.setattr(strategies, "installed", lambda: {"plugin_xyz": point})
    herdsim.outputs.compare_dir.load_outputs(out).plot("sleeps")
    openmetrics.load_run(out)
    assert loaded == []


# writes outside the folder: one writer, which never follows a link out of its folder
def test_the_writer_never_follows_a_link_out_of_its_folder(tmp_path):
    inside, outside = tmp_path / "out", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "tasks").symlink_to(outside)
    with pytest.raises(OutputDirError, match="symbolic link leads out"):
        atomic.write_file(inside / "tasks" / "t.json", "{}", root=inside)
    (inside / "planted.json").symlink_to(outside / "victim.json")  # dangling: replaced
    atomic.write_file(inside / "planted.json", "{}")
    assert not (outside / "victim.json").exists() and not any(outside.iterdir())
    assert (inside / "planted.json").read_text() == "{}" and \
        not (inside / "planted.json").is_symlink()


def test_copy_to_refuses_a_planted_link(tmp_path):
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "outage.yaml").symlink_to(tmp_path / "victim.yaml")
    result, _ = run_cli(tmp_path, "scenarios", "--copy-to", "cp")
    assert result.exit_code == 2 and not (tmp_path / "victim.yaml").exists()


# sweep integrity: sealed folders, task files that prove sweep, cell and result
@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    from herdsim.experiments import sweep

    folder = tmp_path_factory.mktemp("sweep")
    (folder / "s.yaml").write_text(yaml.safe_dump(TINY))
    grid = ["workers.count=2,3"]
    planned = sweep.plan(folder / "s.yaml", grid, replications=1)
    out = sweep.run_sweep(planned, folder / "sw", processes=1, progress=False)
    return planned, out


def test_a_seed_axis_keeps_its_value_and_its_cells_never_share_runs(tmp_path):
    from herdsim.experiments import sweep

    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    with pytest.raises(herdsim.errors.SweepError, match="share runs"):
        sweep.plan(tmp_path / "s.yaml", ["seed=1,2"], replications=2)
    planned = sweep.plan(tmp_path / "s.yaml", ["seed=1,10"], replications=2)
    seeds = {(t.keys["seed"], t.scenario["seed"]) for t in planned.tasks()}
    assert seeds == {(1, 1), (1, 2), (10, 10), (10, 11)}  # every run its own seed
    task = next(planned.tasks(skip={planned.task_id(0, 0, 0)}))
    assert run_task(task)["seed"] == 1  # the axis value, not the replication's seed


def _task_mutations():
    return st.one_of(
        st.sampled_from(["sweep", "task", "cell", "replication", "state", "workers.count",
                         "jobs_submitted"]).map(lambda k: ("drop", k)),
        st.tuples(st.just("set"), st.sampled_from(["sweep", "cell", "replication", "state",
                                                   "workers.count", "goodput",
                                                   "jobs_submitted"]),
                  st.sampled_from([None, "x", -1, 1.5, 99, [1], math.nan, 1e999])))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_task_mutations())
def test_a_task_file_counts_only_when_it_proves_its_task(small_sweep, mutation):
    planned, out = small_sweep
    manifest = sweep_dir._manifest(out)
    path = sorted((out / sweep_dir.TASKS).glob("c*.json"))[0]
    row = json.loads(path.read_text())
    assert sweep_dir._task(path, manifest) == row  # the file as written proves itself
    kind, key, *value = mutation
    forged = dict(row)
    if kind == "drop":
        forged.pop(key)
    else:
        forged[key] = value[0]
    new = value[0] if value else None
    number = isinstance(new, (int, float)) and not isinstance(new, bool) and new >= 0 \
        and math.isfinite(new)
    if forged == row or (kind == "set" and (
            (key == "goodput" and (new is None or number))
            or (key == "jobs_submitted" and number and new == int(new)))):
        return  # still a possible result of this task
    fake = path.with_name("forged") / path.name
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(json.dumps(forged))
    assert sweep_dir._task(fake, manifest) is None


def test_a_task_file_of_another_sweep_is_redone(small_sweep, tmp_path):
    planned, out = small_sweep
    path = sorted((out / sweep_dir.TASKS).glob("c*.json"))[0]
    foreign = json.loads(path.read_text()) | {"sweep": "0" * 64}
    (tmp_path / path.name).write_text(json.dumps(foreign))
    assert sweep_dir._task(tmp_path / path.name, sweep_dir._manifest(out)) is None


@pytest.mark.parametrize("name", ["manifest.json", "sweep.parquet"])
def test_an_edited_sweep_folder_is_named(small_sweep, tmp_path, name):
    copy_dir = tmp_path / "sw"
    __import__("shutil").copytree(small_sweep[1], copy_dir)
    with (copy_dir / name).open("ab") as stream:
        stream.write(b" ")
    with pytest.raises(herdsim.errors.SweepError, match=f"{name}: changed"):
        sweep_dir.load_sweep(copy_dir)


# readers that accept impossible data: one validating reader per output kind
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(["time", "arrivals", "attempts", "success", "retry",
                               "failed_dlq", "rejected", "queue_depth", "in_flight"]),
       row=st.integers(0, 9), value=st.sampled_from([math.nan, math.inf, -1, 0.5, -0.001]))
def test_an_impossible_time_series_value_is_named(tmp_path_factory, column, row, value):
    if value == 0.5 and column in ("time", "queue_depth", "in_flight"):
        return  # a gauge (or a time) may be fractional; a count of events may not
    out = damaged_copy(tmp_path_factory)
    frame = __import__("pandas").read_csv(out / "timeseries.csv")
    frame[column] = frame[column].astype(float)
    frame.loc[row, column] = value
    frame.to_csv(out / "timeseries.csv", index=False)
    for read in (herdsim.outputs.compare_dir.load_outputs,
                 openmetrics.load_run):
        with pytest.raises(OutputDirError, match=rf"timeseries.csv: .*{column}"):
            read(out)


def test_a_time_column_out_of_order_is_refused(tmp_path_factory):
    out = damaged_copy(tmp_path_factory)
    frame = __import__("pandas").read_csv(out / "timeseries.csv")
    frame.loc[1:8, "time"] = frame.loc[1:8, "time"].to_numpy()[::-1]  # ends untouched
    frame.to_csv(out / "timeseries.csv", index=False)
    with pytest.raises(OutputDirError, match="time column"):
        herdsim.outputs.compare_dir.load_outputs(out)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["goodput", "jobs_submitted", "state", "latency_censored",
                            "strategy", "peak_to_capacity", "collapses",
                            "succeeded_fraction"]),
       value=st.sampled_from(["NaN", "Infinity", "1e999", "-1", "1.5", '"high"', "[1]",
                              "{}", "true", '"metastable-ish"']))
def test_a_summary_against_the_kpi_registry(tmp_path_factory, key, value):
    from herdsim.analysis.kpis import BY_KEY

    out = damaged_copy(tmp_path_factory)
    summary = json.loads((out / "summary.json").read_text())
    text = json.dumps(summary | {key: "PLACEHOLDER"}).replace('"PLACEHOLDER"', value)
    (out / "summary.json").write_text(text)
    kind = BY_KEY[key].kind
    parsed = json.loads(text.replace("NaN", "null").replace("Infinity", "null"))[key]
    fits = {"text": isinstance(parsed, str) and (key != "state" or parsed in
                                                  ("recovered", "degraded", "metastable")),
            "flag": isinstance(parsed, bool),
            "count": isinstance(parsed, int) and not isinstance(parsed, bool) and parsed >= 0,
            "fraction": isinstance(parsed, (int, float)) and not isinstance(parsed, bool)
            and 0 <= parsed <= 1,
            "real": isinstance(parsed, (int, float)) and not isinstance(parsed, bool)
            and parsed >= 0}[kind] and value not in ("NaN", "Infinity", "1e999")
    if fits:
        herdsim.outputs.compare_dir.load_outputs(out)
    else:
        with pytest.raises(OutputDirError, match=f"summary.json: (.*{key}|not JSON)"):
            herdsim.outputs.compare_dir.load_outputs(out)


@pytest.mark.parametrize("sums", ["[]", "{}", '{"summary.json": "abc"}', "null", "drop"])
def test_checksums_cover_every_file_read_or_are_damaged(tmp_path_factory, sums):
    out = damaged_copy(tmp_path_factory, unseal=False)
    if sums == "drop":
        listing = json.loads((out / "checksums.json").read_text())
        del listing["timeseries.csv"]
        sums = json.dumps(listing)
    (out / "checksums.json").write_text(sums)
    with pytest.raises(OutputDirError, match="checksums.json: damaged|not covered"):
        herdsim.outputs.compare_dir.load_outputs(out)


# the environment saying no: inputs from regular files only, OSError as one line
@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "huge"])
def test_only_regular_files_of_bounded_size_are_read(tmp_path, kind):
    from herdsim.config import files

    path = {"fifo": tmp_path / "f.yaml", "dev_zero": Path("/dev/zero"),
            "directory": tmp_path, "huge": tmp_path / "h.yaml"}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking read would hang
    if kind == "huge":
        with path.open("wb") as stream:
            stream.truncate(files.SCENARIO_LIMIT + 1)  # sparse: no disk used
    with pytest.raises(ScenarioError, match="not a regular file|directory|larger than"):
        load_scenario(path)


def test_a_fifo_where_a_run_file_belongs_is_named(tmp_path_factory):
    out = damaged_copy(tmp_path_factory)
    (out / "sleeps.csv").unlink()
    os.mkfifo(out / "sleeps.csv")
    with pytest.raises(OutputDirError, match="sleeps.csv: not a regular file"):
        herdsim.outputs.compare_dir.load_outputs(out)


@pytest.mark.parametrize("errno_", [28, 30, 36, 13])  # ENOSPC, EROFS, ENAMETOOLONG, EACCES
def test_an_os_error_is_one_line_naming_the_path_and_the_cause(tmp_path, monkeypatch,
                                                               errno_):
    from herdsim.outputs import compare_dir

    def refuse(result, out, *args, **kwargs):
        raise OSError(errno_, os.strerror(errno_), str(out / "timeseries.csv"))

    monkeypatch.setattr(compare_dir, "save_run", refuse)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    result, _ = run_cli(tmp_path, "run", "s.yaml", "--out", "out")
    assert result.exit_code == 2 and "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert errors == [f"error: out/timeseries.csv: {os.strerror(errno_)}"]


@pytest.mark.parametrize("out", ["界" * 90, "/proc/herdsim-out"])
def test_an_out_that_cannot_be_made_is_refused_before_simulating(tmp_path, out):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    result, new = run_cli(tmp_path, "run", "s.yaml", "--out", out)
    assert result.exit_code == 2 and not new and "simulating" not in result.stdout


# long runs: drawn from merged bins, and the figure says so
def test_a_long_run_is_drawn_from_merged_bins_that_keep_every_count():
    from herdsim.plots import coarse
    from herdsim.plots.landing import busiest_of

    sc = load_scenario(_set(TINY, "workload.rate", 2) | {"duration": "4100s", "bin": "1s",
                                                         "workers": {"count": 1}})
    comparison = herdsim.Comparison.from_result(herdsim.run(sc))
    drawn, note = coarse.for_drawing(comparison)
    assert coarse.factor(4100) == 2 and "merged 2 by 2" in note
    assert len(drawn.timeseries) == 2050 and drawn.scenario.bin == 2.0
    for column in ("arrivals", "attempts", "success"):  # counts are conserved
        assert drawn.timeseries[column].sum() == comparison.timeseries[column].sum()
    figure = comparison.plot("timeline")
    assert any("merged 2 by 2" in text.get_text() for text in figure.texts)
    counts = np.arange(10_001) % 7
    top, edges = busiest_of(counts, np.arange(10_002) * 0.01)
    assert len(top) <= coarse.MAX_BINS and top.max() == counts.max()
    assert len(edges) == len(top) + 1


# numbers at the edge
@pytest.mark.parametrize(("change", "field"), [
    ({"workers": {"count": 10**400}}, "workers.count"),
    ({"duration": 10**400}, "duration"),
    ({"breaker": {"enabled": True, "window": 1e-9}}, "breaker.window"),
    ({"downstream": {"concurrency": 2, "overload": {"collapse": {
        "window": 1e-9, "threshold": 3}}}}, "downstream.overload.collapse.window"),
    ({"peak_window": 1e-9}, "peak_window"),
])
def test_edge_numbers_are_refused_naming_the_field(change, field):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(TINY | change)
    assert caught.value.problems[0][0] == field and "\n" not in str(caught.value)


def test_an_outage_listed_twice_is_one_outage():
    twice = [{"start": 0.2, "duration": 0.3}] * 2
    summary = herdsim.run(load_scenario(_set(TINY, "downstream.outages", twice))).summary
    assert summary["outages"] == 1


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 10**6), zeros=st.integers(1, 3))
def test_whole_numbers_with_leading_zeros_are_decimal(n, zeros):
    from herdsim.config.reading import parse_yaml

    assert parse_yaml(f"count: {'0' * zeros}{n}") == {"count": n}


@pytest.mark.parametrize("args", [
    ["sweep", "s.yaml", "--grid", "workers.count=1:" + "9" * 400 + ":3"],
    ["sweep", "s.yaml", "--grid", "workload.rate=1:1e400:3"],
    ["run", "s.yaml", "--fail-if", "goodput < nan"],
    ["compare", "s.yaml", "--strategies", "fixed", "--vary", "workers.count=1,01"],
    ["compare", "s.yaml", "--strategies", "fixed", "--vary", "downstream.service.mean=50ms,0.05"],
])
def test_edge_options_are_one_line(tmp_path, args):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    outcome = assert_clean(*run_cli(tmp_path, *args, "--out", "out"), tmp_path / "out")
    assert outcome == "refused"


def test_a_port_outside_tcp_is_refused(tmp_path_factory):
    from herdsim.outputs import prometheus_server

    with pytest.raises(herdsim.errors.UsageError, match="99999"), \
            prometheus_server.serve(saved_run(tmp_path_factory), 99999):
        pass


# custom strategies
class OnlySleep:
    """A strategy as the docs allow: nothing but ``sleep``."""

    def sleep(self, attempt, prev, rng):
        return 0.05


def test_sys_exit_in_a_strategy_ends_no_run(monkeypatch):
    monkeypatch.setattr(Hostile, "value", "raise")
    monkeypatch.setattr(Hostile, "sleep", lambda self, a, p, r: __import__("sys").exit(0))
    with pytest.raises(StrategyError, match="SystemExit"):
        herdsim.run(load_scenario(OUTAGE))


def test_a_strategy_with_only_sleep_compares_and_draws():
    sc = load_scenario(_set(OUTAGE, "retry.strategy", "exponential"))
    cmp = herdsim.compare(sc, strategies=[f"{__name__}:OnlySleep", "fixed"], processes=1,
                          progress=False)
    assert cmp.plot("sleeps") is not None and len(cmp.summary) == 2


# determinism of the files: same seed, same bytes, every format
@pytest.mark.slow
def test_one_seed_gives_the_same_bytes_in_every_format(tmp_path):
    from herdsim.outputs.compare_dir import save_figures

    comparison = herdsim.Comparison.from_result(herdsim.run(load_scenario(TINY)))
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        save_figures(comparison, tmp_path / folder, ["png", "svg", "pdf"], ["landing"])
    for fmt in ("png", "svg", "pdf"):
        first, second = ((tmp_path / f / f"landing.{fmt}").read_bytes() for f in "ab")
        assert first == second, fmt


# the Python API checks its arguments as the CLI does
@pytest.mark.parametrize("call", [
    lambda sc: herdsim.run(42),
    lambda sc: herdsim.run(sc, progress="yes"),
    lambda sc: herdsim.load_scenario(TINY, overrides=["seed=2"]),
    lambda sc: herdsim.load_scenario(3.5),
    lambda sc: herdsim.compare(sc, strategies=[]),
    lambda sc: herdsim.compare(sc, strategies=["fixed", "fixed"]),
    lambda sc: herdsim.compare(sc, strategies=[1, 2]),
    lambda sc: herdsim.compare(sc, strategies="fixed", processes=-1),
    lambda sc: herdsim.compare(sc, strategies="fixed", replications=0),
    lambda sc: herdsim.compare(sc, strategies="fixed", vary=[("a", 1)]),
    lambda sc: herdsim.save(sc, "out"),
    lambda sc: herdsim.save(herdsim.run(sc), "out", formats="gif"),
    lambda sc: herdsim.save(herdsim.run(sc), None),
])
def test_api_arguments_raise_the_herdsim_error_family(tmp_path, monkeypatch, call):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(herdsim.HerdsimError):
        call(load_scenario(TINY))
    assert not any(tmp_path.iterdir())


def test_api_accepts_what_the_cli_accepts(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    def kpis(result):
        return {k: v for k, v in result.summary.items() if "wall" not in k}

    assert kpis(herdsim.run(str(tmp_path / "s.yaml"))) == kpis(herdsim.run(TINY))
    assert [a.label for a in herdsim.compare(TINY, strategies="fixed, full_jitter",
                                             processes=1, progress=False).arms] == \
        ["fixed", "full_jitter"]
    out = herdsim.save(herdsim.run(TINY), tmp_path / "o", formats="png")
    assert (out / "timeline.png").is_file()


# messages that mislead
def test_capacity_advice_names_the_field_that_costs_most():
    with pytest.raises(ScenarioError, match="workers.count"):  # beyond its bound (1e6)
        load_scenario(_set(TINY, "workers.count", 10**9))
    many = load_scenario(_set(TINY, "workers.count", 10**6))
    assert "lower workers.count" in estimate(many).advice()


@pytest.mark.slow
def test_a_directory_where_a_file_belongs_is_not_called_missing(tmp_path_factory):
    out = damaged_copy(tmp_path_factory)
    (out / "sleeps.csv").unlink()
    (out / "sleeps.csv").mkdir()
    with pytest.raises(OutputDirError) as caught:
        herdsim.outputs.compare_dir.load_outputs(out)
    assert "missing" not in str(caught.value) and "directory" in str(caught.value)


def test_default_outputs_never_collide_or_replace(tmp_path, monkeypatch, tmp_path_factory):
    from herdsim.cli.app import output_dir

    monkeypatch.chdir(tmp_path)
    first = output_dir(None, "x")
    first.mkdir(parents=True)
    assert output_dir(None, "x") != first  # the same second: the next free name
    run = damaged_copy(tmp_path_factory)
    (run / "metrics.om").write_text("mine\n")
    with pytest.raises(herdsim.errors.OutputExistsError):
        openmetrics.export(run)
    assert (run / "metrics.om").read_text() == "mine\n"


def test_the_estimate_bounds_poison_that_retries_at_once_forever():
    """Zero-wait retries of poison run until the run ends: the estimate must say so (it
    once said ~20 calls a job, and the run made thousands of times more)."""
    sc = load_scenario({"name": "p0", "seed": 1, "duration": "3s",
                        "workload": {"rate": 50, "poison_fraction": 0.05},
                        "workers": {"count": 20},
                        "downstream": {"concurrency": 20, "service": {"mean": "1ms"}},
                        "retry": {"strategy": "immediate", "max_retries": None}})
    made = herdsim.run(sc).summary["attempts_total"]
    guess = estimate(sc).calls
    assert made <= guess <= 3 * made  # an upper bound, and not a wild one

"""Hostile input: either a clean run, or exit 2 with one line and nothing written.

Hypothesis writes scenario files (wrong types, non-finite and huge numbers, odd bytes and
encodings, duplicate keys, hostile names) and ``--set`` strings, and runs ``herdsim run``
in-process. The property: exit 0 with the output directory under the folder asked for, or
exit 2 with exactly one ``error:`` line on stderr, no traceback and no file written.
Examples pin the classes of issue 12 one by one.
"""

from __future__ import annotations

import copy
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
from herdsim.config.scenario import load_scenario
from herdsim.errors import CapacityError, OutputDirError, ScenarioError, StrategyError
from herdsim.experiments.sweep import plan, run_task
from herdsim.model.estimate import available_memory, estimate
from herdsim.outputs import atomic, sweep_dir

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
                "herdsim.policies.strategies:Fixed", "!!python/object:os.system"]
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
    assert guess.jobs == pytest.approx(3.6e9) and guess.bytes > available_memory()
    with pytest.raises(CapacityError, match="3,600,000,000 jobs"):
        herdsim.run(sc)
    small = load_scenario(TINY)
    result = herdsim.run(small)  # the estimate bounds what a run really records
    assert len(result.jobs) <= 1.5 * estimate(small).jobs + 10
    assert result.attempt_times.size <= estimate(small).calls + 10


def test_a_sweep_refuses_a_cell_that_cannot_fit_unless_forced(tmp_path):
    """--force reaches every task of a sweep, and is no part of what the sweep is (its
    digest): the same sweep resumes with or without it."""
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(TINY | {"duration": "1h"}))
    grid = ["workload.rate=1000000,2000000"]
    refused, forced = plan(path, grid), plan(path, grid, force=True)
    assert refused.manifest()["digest"] == forced.manifest()["digest"]
    assert {task.force for task in refused.tasks()} == {False}
    assert {task.force for task in forced.tasks()} == {True}
    with pytest.raises(CapacityError, match="jobs"):
        run_task(next(refused.tasks()))


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


def test_an_empty_sweep_task_file_is_redone(tmp_path):
    tasks = tmp_path / sweep_dir.TASKS
    tasks.mkdir(parents=True)
    (tasks / "c0000-s0-r0.json").write_text("")
    (tasks / "c0001-s0-r0.json").write_text(json.dumps({"task": "c0001-s0-r0", "x": 1}))
    assert sweep_dir.finished(tmp_path) == {"c0001-s0-r0"}


def test_durations_that_would_not_advance_the_clock_or_never_finish_are_refused():
    """A 5e-324 s poll interval once hung forever: the clock cannot advance by it."""
    with pytest.raises(ScenarioError, match="workers.poll_interval: .*below 1us"):
        load_scenario(_set(TINY, "workers.poll_interval", 5e-324))
    sc = load_scenario(_set(TINY, "workers.poll_interval", "1us") | {"duration": "1e8s"})
    assert estimate(sc).events > 1e14  # the poller alone ticks duration / poll_interval
    with pytest.raises(CapacityError, match="simulated events"):
        herdsim.run(sc)

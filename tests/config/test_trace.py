"""Recorded traces: every job arrives at the trace's time (× time_scale, + start), the
file is streamed, and a bad line is one error naming it."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import herdsim
from herdsim.cli.app import app
from herdsim.config import trace as traces
from herdsim.errors import ScenarioError
from herdsim.outputs.compare_dir import load_outputs

SCENARIO = {"name": "traced", "duration": "20s", "seed": 1,
            "workers": {"count": 20}, "downstream": {"concurrency": 20,
                                                     "service": {"mean": "20ms"}}}


def _times(n: int = 3000, seed: int = 5) -> np.ndarray:
    """Sorted times in [0, 9) with repeats (several jobs at one instant)."""
    rng = np.random.default_rng(seed)
    times = np.sort(np.round(rng.uniform(0, 9, n), 6))
    times[100:110] = times[100]
    return times


def _scenario(tmp_path, trace: dict, **workload) -> dict:
    data = yaml.safe_load(yaml.safe_dump(SCENARIO))
    data["workload"] = {"arrivals": "trace", "trace": trace, **workload}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("fmt", ["csv", "osdi"])
def test_every_job_arrives_at_its_trace_time(tmp_path, fmt):
    """A run folder's jobs against the file: ``arrival == time × scale + start`` exactly,
    in order, one job per line; the folder records the absolute path and SHA-256."""
    times = _times()
    listed = times.tolist()
    folder = tmp_path / "traces"
    folder.mkdir()
    if fmt == "csv":
        text = "request,time,size\n" + "".join(f"r{i},{t!r},9\n" for i, t in enumerate(listed))
    else:
        text = "# arrival_s request_type size key\n" + "".join(
            f"{t!r}  GET 512 k{i % 7}\n" for i, t in enumerate(listed))
    (folder / "arrivals.txt").write_text(text)
    scenario = _scenario(tmp_path, {"file": "traces/arrivals.txt", "format": fmt,
                                    "time_scale": 2.5, "start": "0.3s"})
    out = herdsim.save(herdsim.run(herdsim.load_scenario(scenario)), tmp_path / "run",
                       formats=[])
    jobs = pd.read_parquet(out / "jobs.parquet")
    expected = times * 2.5 + 0.3
    expected = expected[expected < 20.0]
    np.testing.assert_array_equal(jobs["arrival"].to_numpy(), expected)
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())["workload"]["trace"]
    assert recorded["file"] == str((folder / "arrivals.txt").resolve())
    assert recorded["sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_a_changed_trace_is_refused_when_the_run_is_repeated(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("time\n0.5\n1.0\n")
    sc = herdsim.load_scenario(_scenario(tmp_path, {"file": "t.csv"}))
    assert sc.workload.rate == pytest.approx(2 / 20)  # the trace's mean over the run
    again = herdsim.load_scenario(sc.to_dict())  # the resolved scenario reproduces
    assert again.workload.trace == sc.workload.trace
    path.write_text("time\n0.5\n1.5\n")
    with pytest.raises(ScenarioError, match="workload.trace.sha256: .* has changed"):
        herdsim.load_scenario(sc.to_dict())


@pytest.mark.parametrize("fmt, text, problem", [
    ("csv", "time\n0.1\n0.3\n0.2\n", "line 4: time 0.2 comes before"),
    ("csv", "time\n0.1\n-0.3\n", "line 3: time -0.3 is negative"),
    ("csv", "time\n0.1\nabc\n", "line 3: time 'abc' is not a number"),
    ("csv", "time\n0.1\nnan\n", "line 3: time 'nan' is not finite"),
    ("csv", "t,x\n0.1,1\n", "line 1: no 'time' column"),
    ("csv", "a,time\n1,0.1\n2\n", "line 3: 1 fields"),
    ("osdi", "0.1 GET 1 a\n0.05 GET 1 b\n", "line 2: time 0.05 comes before"),
    ("osdi", "0.1,GET\n", "line 1: time '0.1,GET' is not a number"),
    ("csv", "", "the file is empty"),
])
def test_bad_lines_are_one_error_naming_the_line(tmp_path, fmt, text, problem):
    (tmp_path / "t.txt").write_text(text)
    scenario = _scenario(tmp_path, {"file": "t.txt", "format": fmt})
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(out)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0] and "workload.trace.file" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("trace, workload, field", [
    ({"file": "t.csv", "format": "parquet"}, {}, "workload.trace.format"),
    ({"file": "missing.csv"}, {}, "workload.trace.file"),
    ({"file": "t.csv"}, {"arrivals": "poisson"}, "workload.trace"),  # poisson reads none
    ({"file": "t.csv"}, {"profile": [{"at": 0, "rate": 1}]}, "workload.profile"),
])
def test_bad_trace_settings_name_the_field(tmp_path, trace, workload, field):
    (tmp_path / "t.csv").write_text("time\n0.1\n")
    with pytest.raises(ScenarioError) as err:
        herdsim.load_scenario(_scenario(tmp_path, trace, **workload))
    assert f"{field}:" in str(err.value) and "\n" not in str(err.value)


def test_the_trace_is_streamed(tmp_path):
    """Reading stops where the run stops: a bad line after the first is not read."""
    (tmp_path / "t.csv").write_text("time\n0.5\n" + "0.7\n" * 1000 + "oops\n")
    times = traces.times(tmp_path / "t.csv", "csv")
    assert [next(times) for _ in range(3)] == [0.5, 0.7, 0.7]
    with pytest.raises(ScenarioError, match="line 1003"):
        list(times)


def test_a_run_folder_stays_readable_when_its_trace_has_gone(tmp_path):
    (tmp_path / "t.csv").write_text("time\n0.5\n1.0\n")
    sc = herdsim.load_scenario(_scenario(tmp_path, {"file": "t.csv"}))
    out = herdsim.save(herdsim.run(sc), tmp_path / "run", formats=[])
    (tmp_path / "t.csv").unlink()
    assert load_outputs(out).scenario == sc
    result = CliRunner().invoke(app, ["run", str(out / "scenario.yaml"), "--out",
                                      str(tmp_path / "again")])
    assert result.exit_code == 2 and "no such file" in result.output


def test_trace_command_summarises_and_writes_a_profile(tmp_path):
    """The summary's count and percentiles against numpy over the same bins; the profile
    it writes loads as a scenario's workload whose rates are the bins' counts / width."""
    times = _times(2000)
    (tmp_path / "t.csv").write_text("time\n" + "".join(f"{t!r}\n" for t in times.tolist()))
    out = tmp_path / "profile.yaml"
    result = CliRunner().invoke(app, ["trace", str(tmp_path / "t.csv"), "--bin", "500ms",
                                      "--profile", str(out)])
    assert result.exit_code == 0, result.output
    counts = np.bincount((times // 0.5).astype(int))
    p50, p90, p99 = np.percentile(counts / 0.5, [50, 90, 99])
    assert f"{len(times):,} arrivals" in result.output
    assert f"p50 {p50:,.4g}, p90 {p90:,.4g}, p99 {p99:,.4g}" in result.output
    steps = yaml.safe_load(out.read_text())["workload"]["profile"]
    sc = herdsim.load_scenario({"name": "p", "duration": "9s",
                                "workload": {"profile": steps}})
    for k, count in enumerate(counts):
        step = [s for s in sc.workload.profile if s.at <= k * 0.5 + 1e-9][-1]
        assert step.rate == count / 0.5
    again = CliRunner().invoke(app, ["trace", str(tmp_path / "t.csv"), "--profile", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


# bounds before allocating (issue 36): a span, a FIFO
@pytest.mark.parametrize("last", ["1e15", "1e300", "1.7e308"])
def test_a_span_past_the_bin_bound_is_refused_naming_the_arrival(tmp_path, last):
    path = tmp_path / "far.csv"
    path.write_text(f"time\n0\n1\n{last}\n")
    with pytest.raises(ScenarioError, match=r"far.csv: arrival 3 at .* \(at most 10,000,000\)"):
        traces.bin_counts(path, "csv", 1.0)
    assert len(traces.bin_counts(path, "csv", float(last) / 1000)) <= 1001  # a wider bin


def test_the_bin_bound_is_exact(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_BINS", 100)
    path = tmp_path / "t.csv"
    path.write_text("time\n0\n99.5\n")
    assert len(traces.bin_counts(path, "csv", 1.0)) == 100
    path.write_text("time\n0\n100\n")
    with pytest.raises(ScenarioError, match="at most 100"):
        traces.bin_counts(path, "csv", 1.0)


def test_a_fifo_as_the_trace_is_refused_at_once(tmp_path):
    import os
    import threading

    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    outcome: list = []

    def read() -> None:
        try:
            traces.scan(fifo, "csv")
        except ScenarioError as exc:
            outcome.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # the old reader blocks for ever: unblock it, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("reading a FIFO trace hangs")
    assert outcome and "not a regular file" in outcome[0]
    path = _scenario(tmp_path, {"file": str(fifo)})
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and "not a regular file" in result.output

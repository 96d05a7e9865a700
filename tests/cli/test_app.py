"""The command line, in-process through typer's CliRunner (fast), and through its real
entry points (the installed ``herdsim`` script and ``python -m herdsim``) in a few smoke tests.

Every bad input gets exit code 2, one clear line naming the file and the field, no
traceback, and leaves no output directory behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import tiny
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.outputs.compare_dir import OUTPUT_FILES

WALL_CLOCK_KEYS = {"wall_seconds", "calls_per_wall_second"}

GOOD = """\
name: cli
duration: 2s
workload:
  rate: 20
workers:
  count: 5
downstream:
  concurrency: 2
  service: {distribution: exponential, mean: 20ms}
retry:
  strategy: exponential
"""


def herdsim(*args: str, cwd: Path) -> SimpleNamespace:
    """``herdsim ARGS`` run in-process from the folder *cwd*."""
    before = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args))
    finally:
        os.chdir(before)
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout,
                           stderr=result.stderr, exception=result.exception)


def entry_point(*command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A real process: the installed console script or ``python -m herdsim``."""
    return subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, timeout=120)


# name -> (file text or None for a missing file, extra args, the field the error names,
#          whether to pass --out)
BAD_INPUTS = {
    "missing file": (None, [], "", True),
    "yaml syntax": ("name: cli\nworkload: [rate: 1\n", [], "line", False),
    "unknown field": (GOOD.replace("rate: 20", "rate: 20\n  poison_fraktion: 0.1"), [],
                      "workload.poison_fraktion", True),
    "negative count": (GOOD.replace("count: 5", "count: -5"), [], "workers.count", False),
    "rate of zero": (GOOD.replace("rate: 20", "rate: 0"), [], "workload.rate", True),
    "outage past the end": (
        GOOD.replace("  concurrency: 2",
                     "  concurrency: 2\n  outages: [{start: 1s, duration: 5s}]"),
        [], "downstream.outages.0", False),
    "unknown strategy": (GOOD.replace("strategy: exponential", "strategy: exponentail"), [],
                         "retry.strategy", True),
    "--set path that does not exist": (GOOD, ["--set", "retry.strategi=fixed"],
                                       "retry.strategi", False),
    "--set list item that does not exist": (GOOD, ["--set", "downstream.outages.0.start=1s"],
                                            "downstream.outages.0.start", True),
    "malformed --set": (GOOD, ["--set", "retry.strategy"], "retry.strategy", False),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_clear_line_and_writes_nothing(tmp_path, case):
    text, extra, field, with_out = BAD_INPUTS[case]
    scenario = tmp_path / "scenario.yaml"
    if text is not None:
        scenario.write_text(text)
    out = ["--out", "results/run1"] if with_out else []
    proc = herdsim("run", "scenario.yaml", *extra, *out, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "scenario.yaml" in lines[0] and field in lines[0], lines[0]
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "results").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["scenario.yaml"] if text else [])


def test_an_existing_output_dir_is_refused_and_left_untouched(tmp_path):
    (tmp_path / "scenario.yaml").write_text(GOOD)
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = herdsim("run", "scenario.yaml", "--out", "taken", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "taken" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenario.yaml", "taken"]


def test_validate_prints_the_resolved_scenario(tmp_path, scenarios_dir):
    proc = herdsim("validate", str(scenarios_dir / "outage.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first, _, rest = proc.stdout.partition("\n")
    assert "valid" in first
    resolved = yaml.safe_load(rest)
    assert resolved["name"] == "outage" and resolved["downstream"]["concurrency"] == 2000
    assert list(tmp_path.iterdir()) == []


def test_strategies_lists_every_builtin(tmp_path):
    from herdsim.policies.backoff import BUILT_IN

    proc = herdsim("strategies", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in BUILT_IN:
        assert name in proc.stdout


@pytest.mark.slow
def test_run_writes_every_output_and_its_scenario_reproduces_it(tmp_path, scenarios_dir):
    """A 30 s cut of the bundled story, then a rerun from the scenario.yaml it wrote."""
    first = herdsim("run", str(scenarios_dir / "outage.yaml"), "--set", "duration=30s",
                    "--out", "first", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "first" in first.stdout
    written = sorted(p.name for p in (tmp_path / "first").iterdir())
    assert set(written) >= {"timeseries.csv", "sleeps.csv", "jobs.parquet", "summary.json",
                            "scenario.yaml"} and set(written) >= set(OUTPUT_FILES)
    assert yaml.safe_load((tmp_path / "first" / "scenario.yaml").read_text())["duration"] == 30

    again = herdsim("run", "first/scenario.yaml", "--out", "again", cwd=tmp_path)
    assert again.returncode == 0, again.stderr

    def summary(folder: str) -> dict:
        data = json.loads((tmp_path / folder / "summary.json").read_text())
        return {k: v for k, v in data.items() if k not in WALL_CLOCK_KEYS}

    assert summary("first") == summary("again")
    assert summary("first")["attempts_total"] > 0


@pytest.mark.parametrize("command", [[shutil.which("herdsim") or "herdsim"],
                                     [sys.executable, "-m", "herdsim"]])
@pytest.mark.slow
def test_the_real_entry_points_run_and_refuse_bad_input(tmp_path, command):
    """The console script and ``python -m herdsim`` reach the same app: a bad scenario gets
    exit 2 and one line from a real process, and ``--help`` lists the commands."""
    (tmp_path / "scenario.yaml").write_text(GOOD.replace("count: 5", "count: -5"))
    proc = entry_point(*command, "run", "scenario.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        line for line in proc.stderr.splitlines() if "workers.count" in line]
    helped = entry_point(*command, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "reproduce" in helped.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenario.yaml"]


# the boundary owns what the user sees: libraries' warnings, a reader gone (issue 36)
GLYPHS = "herd 🔥 漢字"


@pytest.mark.slow
def test_missing_glyphs_are_one_line_and_nothing_under_quiet(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny(name=GLYPHS)))
    said = CliRunner().invoke(app, ["run", str(scenario), "--out", str(tmp_path / "a")])
    assert said.exit_code == 0, said.output
    warned = [line for line in said.output.splitlines() if "warning" in line.lower()]
    assert warned == ["warning: figures: the font (DejaVu Sans) has no glyph for 🔥, 漢, "
                      "字; drawn as boxes"]
    quiet = CliRunner().invoke(app, ["run", str(scenario), "-q", "--out", str(tmp_path / "b")])
    assert quiet.exit_code == 0 and quiet.output == ""


@pytest.mark.slow
def test_a_reader_that_stops_early_ends_nothing(tmp_path):
    piped = subprocess.run(
        ["bash", "-c", f"cd {tmp_path} && {sys.executable} -m herdsim kpis | head -c 0; "
                       "echo ${PIPESTATUS[0]}"],
        capture_output=True, text=True, timeout=120)
    assert (piped.stdout, piped.stderr) == ("0\n", "")


def _herdsim(shell: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", shell.replace("herdsim", f"{sys.executable} -m herdsim")],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_closed_stdout_is_one_line_on_stderr(tmp_path):
    closed = _herdsim(f"cd {tmp_path} && herdsim kpis >&-")
    assert closed.returncode == 0
    assert closed.stderr.splitlines() == ["warning: stdout is closed; what herdsim prints "
                                          "there is discarded"]

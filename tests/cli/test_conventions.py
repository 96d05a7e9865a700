"""CLI conventions (issue 11, item 7), in-process with typer's CliRunner: --version,
completion, --json alone on stdout, --quiet, the --fail-if CI gate (exit 3), progress lines
when piped, plain help with no placeholders or cut text. Budget: about 5 s (tiny runs)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from importlib.metadata import version

import click
import pytest
import yaml
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.cli.gate import parse
from herdsim.errors import UsageError
from herdsim.system.progress import Lines


@pytest.fixture()
def scenario(tmp_path, make_scenario):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(make_scenario(
        downstream={"outages": [{"start": "500ms", "duration": "300ms"}]})))
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_version_is_the_installed_one():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"herdsim {version('herdsim')}"


def test_python_m_herdsim_is_the_same_command():
    out = subprocess.run([sys.executable, "-m", "herdsim", "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"herdsim {version('herdsim')}"


def test_completion_is_offered():
    result = invoke("--help")
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


@pytest.mark.slow
def test_run_json_is_the_summary_alone_on_stdout(scenario, tmp_path):
    """stdout parses as JSON and equals summary.json; the output path goes to stderr."""
    out = tmp_path / "out"
    result = invoke("run", str(scenario), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == json.loads((out / "summary.json").read_text())
    assert isinstance(printed["jobs_succeeded"], int) and printed["state"] in (
        "recovered", "degraded", "metastable")
    assert str(out) in result.stderr


@pytest.mark.slow
def test_quiet_prints_nothing(scenario, tmp_path):
    result = invoke("run", str(scenario), "--out", str(tmp_path / "o"), "--quiet")
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize("condition, code", [
    ("jobs_submitted > 0", 3), ("jobs_submitted < 0", 0), ("state == metastable", 0),
    ("succeeded_fraction <= 100%", 3), ("peak_to_capacity > 1e9", 0),
])
def test_fail_if_exits_3_exactly_when_the_condition_holds(scenario, tmp_path, condition, code):
    out = tmp_path / "o"
    result = invoke("run", str(scenario), "--out", str(out), "--quiet", "--fail-if", condition)
    assert result.exit_code == code, result.output
    assert (condition in result.stderr) == (code == 3)


def test_fail_if_on_a_never_recovering_run_treats_recovery_as_infinite(make_scenario):
    """Down for the rest of the run: recovery_time > 30 holds, recovery_time < 30 does not;
    an undefined KPI other than recovery never satisfies a condition."""
    (recovery_long, recovery_short, amplification) = parse(
        ["recovery_time > 30", "recovery_time < 30", "amplification > 0"])
    stuck = {"outages": 1, "recovery_time": None, "amplification": None}
    assert recovery_long.holds(stuck) and not recovery_short.holds(stuck)
    assert not amplification.holds(stuck)


@pytest.mark.parametrize("condition", ["nonsense > 1", "goodput >> 1", "state < x",
                                       "goodput > fast"])
def test_a_bad_fail_if_is_one_line_exit_2_and_nothing_written(scenario, tmp_path, condition):
    out = tmp_path / "o"
    result = invoke("run", str(scenario), "--out", str(out), "--fail-if", condition)
    assert result.exit_code == 2 and not out.exists()
    assert len(result.stderr.strip().splitlines()) == 1 and "--fail-if" in result.stderr
    with pytest.raises(UsageError):
        parse([condition])


@pytest.mark.slow
def test_compare_json_ranks_the_arms_and_gates_any_arm(scenario, tmp_path):
    out = tmp_path / "c"
    result = invoke("compare", str(scenario), "--strategies", "fixed,full_jitter", "--out",
                    str(out), "--format", "png", "--processes", "1", "--json",
                    "--fail-if", "jobs_succeeded >= 0")
    assert result.exit_code == 3, result.output
    printed = json.loads(result.stdout)
    assert [arm["rank"] for arm in printed["arms"]] == [1, 2]
    assert {arm["arm"] for arm in printed["arms"]} == {"fixed", "full_jitter"}
    assert all(isinstance(arm["jobs_succeeded"], int) for arm in printed["arms"])
    for arm in printed["arms"]:  # every arm named, with the value the gate saw (as k6 does)
        assert f"{arm['arm']} (jobs_succeeded {arm['jobs_succeeded']:,})" in result.stderr


def test_piped_progress_is_a_line_every_few_seconds_with_an_eta():
    """Lines prints at most once per ``every`` seconds, then the final state once."""
    stream = io.StringIO()
    with Lines(every=3600, unit="s simulated", stream=stream) as lines:
        task = lines.add_task("simulating x", total=90)
        for now in range(0, 91, 10):
            lines.update(task, completed=now)
    printed = stream.getvalue().splitlines()
    assert len(printed) == 2  # the first update, and the end
    assert printed[0].startswith("simulating x: 0 of 90 s simulated (0%)")
    assert printed[1].startswith("simulating x: 90 of 90 s simulated (100%)")
    stream = io.StringIO()
    with Lines(every=0, stream=stream) as lines:
        task = lines.add_task("runs", total=4)
        lines.advance(task)
    assert "eta" in stream.getvalue().splitlines()[0] or "(0%)" in stream.getvalue()


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


def test_help_has_no_type_placeholders_after_flags_and_nothing_cut():
    """Every command's help: flags without ``<bool>``, no text cut with an ellipsis."""
    main = click.Context(typer_group := __import__("typer").main.get_command(app))
    assert main is not None
    for path in all_commands(typer_group):
        text = invoke(*path, "--help").stdout
        assert text, path
        assert "<bool>" not in text and "…" not in text, path
        assert not re.search(r"\w\.\.\.$", text, re.M), path  # a sentence cut short

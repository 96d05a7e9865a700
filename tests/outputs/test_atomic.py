"""Outputs honour the umask as any new file does: 0644 files and 0755 folders under umask
022, 0640 and 0750 under 027 (not mkstemp's 0600, which a static web server cannot
serve): a file written alone, a staged directory with its checksums.json, and a run's
directory with a report written into it later."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from conftest import tiny
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.outputs.atomic import staged_dir, write_file


@pytest.fixture(params=[0o022, 0o027], ids=["umask022", "umask027"])
def umask(request):
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def modes(root: Path) -> dict[str, str]:
    """Every file's and folder's permission bits under *root*."""
    return {str(p.relative_to(root)): oct(stat.S_IMODE(p.stat().st_mode))
            for p in root.rglob("*")}


def expected(root: Path, umask: int) -> dict[str, str]:
    return {str(p.relative_to(root)): oct((0o777 if p.is_dir() else 0o666) & ~umask)
            for p in root.rglob("*")}


def test_a_file_and_a_staged_directory_get_the_modes_of_new_files(tmp_path, umask):
    write_file(tmp_path / "alone.txt", "one\n")
    with staged_dir(tmp_path / "out") as staging:
        staging.mkdir()
        write_file(staging / "report.html", "<p>two</p>\n")
        (staging / "plain.csv").write_text("a\n")  # written as any library writes
    assert modes(tmp_path) == expected(tmp_path, umask)
    assert {"alone.txt", "out/report.html", "out/checksums.json"} <= set(modes(tmp_path))


@pytest.mark.slow
def test_a_run_and_its_report_are_written_with_the_umask(tmp_path):
    scenario, out = tmp_path / "tiny.yaml", tmp_path / "out"
    runner = CliRunner()
    before = os.umask(0o027)
    try:
        scenario.write_text(yaml.safe_dump(tiny()))
        done = runner.invoke(app, ["run", str(scenario), "--out", str(out), "-q"])
        assert done.exit_code == 0, done.output
        done = runner.invoke(app, ["report", str(out)])
        assert done.exit_code == 0, done.output
    finally:
        os.umask(before)
    assert {"out", "out/report.html", "out/checksums.json"} <= set(modes(tmp_path))
    assert modes(tmp_path) == expected(tmp_path, 0o027)


# a failure that names no file (a full disk) names the output written (issue 36)
def _full(*_args, **_kwargs):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_while_writing_a_file_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "replace", _full)
    with pytest.raises(OSError) as failed:
        write_file(tmp_path / "summary.json", "{}")
    assert failed.value.filename == str(tmp_path / "summary.json")
    assert failed.value.strerror == "No space left on device"
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_a_full_disk_in_a_staged_directory_names_the_file_under_its_output(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(OSError) as failed, staged_dir(out) as staging:
        _full(staging / "jobs.parquet")
    assert failed.value.filename == str(out)
    with pytest.raises(OSError) as failed, staged_dir(out) as staging:
        (staging / "x.csv").write_text("")
        raise OSError(28, "No space left on device", str(staging / "x.csv"))
    assert failed.value.filename == str(out / "x.csv")
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_says_which_output_the_full_disk_stopped(tmp_path, monkeypatch):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny()))
    monkeypatch.setattr(os, "replace", _full)
    result = CliRunner().invoke(app, ["run", str(tmp_path / "s.yaml"), "-q", "--out",
                                          str(tmp_path / "r")])
    assert result.exit_code == 2
    assert result.output == (f"error: {tmp_path / 'r' / 'checksums.json'}: No space left "
                             "on device\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]

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

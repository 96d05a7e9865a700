"""Outputs honour the umask as any new file does: 0644 files and 0755 folders under umask
022, 0640 and 0750 under 027 (not mkstemp's 0600, which a static web server cannot
serve), for a run's directory, its checksums.json, and a report written into it later."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from conftest import tiny
from typer.testing import CliRunner

from herdsim.cli import app


@pytest.fixture(params=[0o022, 0o027], ids=["umask022", "umask027"])
def umask(request):
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_run_and_its_report_are_written_with_the_umask(tmp_path, umask):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(tiny()))
    out = tmp_path / "out"
    runner = CliRunner()
    done = runner.invoke(app, ["run", str(scenario), "--out", str(out), "-q"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["report", str(out)])
    assert done.exit_code == 0, done.output
    files = sorted(p for p in out.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert {"report.html", "checksums.json", "summary.json", "timeseries.csv"} <= names
    assert {p.name: oct(mode(p)) for p in files} == {p.name: oct(0o666 & ~umask)
                                                     for p in files}
    folders = [out, *(p for p in out.rglob("*") if p.is_dir())]
    assert {str(p): oct(mode(p)) for p in folders} == {str(p): oct(0o777 & ~umask)
                                                       for p in folders}

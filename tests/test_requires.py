"""The ``requires`` marker (tests/conftest.py): a test that needs a Debian package skips
without it, naming the package and its ``apt-get install`` line, and fails instead under
CI (an error in the test's setup), so CI can never skip one silently. :func:`require` is
called with PATH and CI set here; the marker itself runs in a pytest of its own on a
two-test file, with a PATH of one empty folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require

TESTS = Path(__file__).resolve().parent
MARKED = """
import pytest

@pytest.mark.requires("redis-server")
def test_redis():
    pass

@pytest.mark.requires("promtool", "chromium")
def test_two():
    pass
"""


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """PATH: one folder holding a stand-in ``redis-server`` and nothing else; no CI."""
    (tmp_path / "bin").mkdir()
    stand_in = tmp_path / "bin" / "redis-server"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CI", raising=False)
    return monkeypatch


def test_a_missing_package_skips_naming_the_apt_get_line(bare):
    with pytest.raises(pytest.skip.Exception, match=r"^promtool and chromium not found on "
                       r"PATH: needs the Debian packages chromium, prometheus \(apt-get "
                       r"install chromium prometheus\)$"):
        require("redis-server", "promtool", "chromium")


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_under_ci_a_missing_package_fails(bare, ci):
    bare.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=r"^prometheus not found on PATH: needs "
                       r"the Debian package prometheus \(apt-get install prometheus\); "
                       r"under CI a missing package fails the test$"):
        require("prometheus")


@pytest.mark.parametrize("ci", [None, "true", "false", "0", ""])
def test_a_command_on_path_lets_the_test_run(bare, ci):
    if ci is not None:
        bare.setenv("CI", ci)
    assert require("redis-server") is None


@pytest.mark.parametrize("ci", ["false", "0", ""])
def test_ci_false_or_empty_is_not_ci(bare, ci):
    bare.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception):
        require("chromium")


@pytest.mark.slow
@pytest.mark.parametrize(("ci", "summary"), [(None, "2 skipped"), ("true", "2 errors")])
def test_the_marker_is_checked_before_each_test(tmp_path, ci, summary):
    """pytest on MARKED with tests/conftest.py as a plugin, an empty PATH and CI=*ci*:
    both tests skip with the apt-get line, or under CI both error in their setup."""
    (tmp_path / "test_marked.py").write_text(MARKED)
    (tmp_path / "empty").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PATH=str(tmp_path / "empty"),
               PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]))
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-rsE", "-q",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:nbmake",
                           "-o", "addopts=", str(tmp_path / "test_marked.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == (1 if ci else 0), done.stdout + done.stderr
    assert summary in done.stdout and "passed" not in done.stdout, done.stdout
    assert "(apt-get install redis-server)" in done.stdout
    assert "(apt-get install chromium prometheus)" in done.stdout

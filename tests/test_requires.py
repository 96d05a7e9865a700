"""The ``requires`` marker (tests/conftest.py): a test that needs a Debian package skips
without it, naming the package and its ``apt-get install`` line, and fails instead under
CI (an error in the test's setup), so CI can never skip one silently. Each case runs
pytest on a two-test file with a PATH that holds only an empty folder or a stand-in
``redis-server``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def outcome(tmp_path: Path, path: str, ci: str | None) -> subprocess.CompletedProcess:
    """pytest on MARKED, with tests/conftest.py as a plugin, *path* as PATH and CI=*ci*."""
    (tmp_path / "test_marked.py").write_text(MARKED)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PATH=path, PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-rsf", "-q",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:nbmake",
                           "-o", "addopts=", str(tmp_path / "test_marked.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_without_the_packages_the_tests_skip_naming_the_apt_get_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = outcome(tmp_path, str(tmp_path / "empty"), None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 skipped" in done.stdout
    assert "redis-server not found on PATH: needs the Debian package redis-server " \
        "(apt-get install redis-server)" in done.stdout
    assert "promtool and chromium not found on PATH: needs the Debian packages " \
        "chromium, prometheus (apt-get install chromium prometheus)" in done.stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_package_fails_the_test(tmp_path, ci):
    (tmp_path / "empty").mkdir()
    done = outcome(tmp_path, str(tmp_path / "empty"), ci)
    assert done.returncode == 1, done.stdout + done.stderr  # failed in setup: an error
    assert "2 errors" in done.stdout and "skipped" not in done.stdout
    assert "under CI a missing package fails the test" in done.stdout


@pytest.mark.parametrize("ci", [None, "true", "false"])
def test_a_command_on_path_runs_the_test(tmp_path, ci):
    """A stand-in ``redis-server`` on PATH: that test runs (and passes) whatever CI says;
    the other still lacks its packages."""
    (tmp_path / "bin").mkdir()
    stand_in = tmp_path / "bin" / "redis-server"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    done = outcome(tmp_path, str(tmp_path / "bin"), ci)
    assert "1 passed" in done.stdout, done.stdout + done.stderr
    assert ("1 error" if ci == "true" else "1 skipped") in done.stdout

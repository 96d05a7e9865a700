"""herdsim installed from its wheel, outside the checkout, runs the bundled scenarios.

Builds the wheel as pip does for a user, installs it with no dependencies into a fresh
virtualenv that sees this interpreter's site-packages (for numpy, SimPy and the rest), and
runs the commands a new user types, from an empty folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin`` folder of a virtualenv holding herdsim from a freshly built wheel."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(work / "dist"), str(ROOT)], check=True, timeout=300)
    (wheel,) = (work / "dist").glob("herdsim-*.whl")
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(work / "venv")
    bin_dir = work / "venv" / "bin"
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    str(wheel)], check=True, timeout=300)
    return bin_dir


def run_in(folder: Path, *command: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(list(command), cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_wheel_runs_bundled_scenarios_from_an_empty_folder(installed, tmp_path):
    where = run_in(tmp_path, str(installed / "python"), "-c",
                   "import herdsim; print(herdsim.__file__)")
    assert where.returncode == 0, where.stderr
    assert str(installed.parent) in where.stdout, "herdsim was not imported from the wheel"

    listed = run_in(tmp_path, str(installed / "herdsim"), "scenarios")
    assert listed.returncode == 0 and "outage" in listed.stdout, listed.stderr

    ran = run_in(tmp_path, str(installed / "herdsim"), "run", "outage",
                 "--set", "duration=30s", "--out", "outage-run")
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "outage-run" / "summary.json").is_file()

    reproduced = run_in(tmp_path, str(installed / "herdsim"), "reproduce", "retries",
                        "--runs", "1", "--out", "retries")
    assert reproduced.returncode == 0, reproduced.stderr
    assert (tmp_path / "retries").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outage-run", "retries"]

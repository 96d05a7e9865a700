"""herdsim installed from its wheel, outside the checkout, runs the bundled scenarios.

Builds the wheel as pip does for a user and installs it into a fresh, isolated virtualenv
(no system site packages) with its declared dependencies resolved from the package index,
as ``pip install herdsim`` does for a user. Anything the package imports but does not
declare fails here, even when this interpreter (or a test extra) happens to have it.
Then it runs the commands a new user types, from an empty folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # a wheel build and a virtualenv from the package index
EVERY_MODULE = """
import importlib, pkgutil, herdsim
names = [m.name for m in pkgutil.walk_packages(herdsim.__path__, "herdsim.")
         if not m.name.endswith(".__main__")]  # running it is the CLI itself
for name in names:
    importlib.import_module(name)
print(len(names), herdsim.__file__)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin`` folder of an isolated virtualenv holding herdsim from a freshly built
    wheel and the dependencies it declares, nothing else."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(work / "dist"), str(ROOT)], check=True, timeout=300)
    (wheel,) = (work / "dist").glob("herdsim-*.whl")
    venv.EnvBuilder(system_site_packages=False, with_pip=True).create(work / "venv")
    bin_dir = work / "venv" / "bin"
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", str(wheel)],
                   check=True, timeout=900, env=clean_env())
    return bin_dir


def clean_env() -> dict[str, str]:
    """This environment without anything that points Python at other packages."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONUSERBASE")}


def run_in(folder: Path, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), cwd=folder, env=clean_env(), capture_output=True,
                          text=True, timeout=300)


def test_the_isolated_wheel_imports_every_module(installed, tmp_path):
    """Every module of the package imports with only the declared dependencies."""
    imported = run_in(tmp_path, str(installed / "python"), "-I", "-c", EVERY_MODULE)
    assert imported.returncode == 0, imported.stderr
    count, where = imported.stdout.split()
    assert int(count) > 50 and where.startswith(str(installed.parent))


def test_the_wheel_runs_bundled_scenarios_from_an_empty_folder(installed, tmp_path):
    where = run_in(tmp_path, str(installed / "python"), "-c",
                   "import herdsim; print(herdsim.__file__)")
    assert where.returncode == 0, where.stderr
    assert str(installed.parent) in where.stdout, "herdsim was not imported from the wheel"

    listed = run_in(tmp_path, str(installed / "herdsim"), "scenarios")
    assert listed.returncode == 0 and "outage" in listed.stdout, listed.stderr

    ran = run_in(tmp_path, str(installed / "herdsim"), "run", "outage", "--out", "outage-run")
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "outage-run" / "summary.json").is_file()

    reproduced = run_in(tmp_path, str(installed / "herdsim"), "reproduce", "retries",
                        "--runs", "1", "--out", "retries")
    assert reproduced.returncode == 0, reproduced.stderr
    assert (tmp_path / "retries").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outage-run", "retries"]


CACHE_PROBE = """
import herdsim
from herdsim.fluid import loop
from herdsim.config import bundled
herdsim.predict(herdsim.load_scenario(bundled.path("testbed_herd")))
print(sum(loop.run.stats.cache_hits.values()), sum(loop.run.stats.cache_misses.values()))
"""


def test_the_wheel_predicts_and_a_later_process_loads_the_compiled_loop(installed, tmp_path):
    """predict from the wheel (numba, a declared dependency, compiles the fluid model's
    loop once): the first process compiles and caches it beside the installed module, the
    next loads it from that cache instead of compiling again (about 10 s each if not)."""
    predicted = run_in(tmp_path, str(installed / "herdsim"), "predict", "outage", "--out",
                       "outage-predicted", "--quiet")
    assert predicted.returncode == 0, predicted.stderr
    assert (tmp_path / "outage-predicted" / "summary.json").is_file()
    again = run_in(tmp_path, str(installed / "python"), "-c", CACHE_PROBE)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == ["1", "0"], again.stdout  # a cache hit, no compile

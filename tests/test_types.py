"""The package type-checks: mypy (configured in pyproject.toml, with pydantic's plugin) finds
no error in herdsim, and the wheel says it is typed (``herdsim/py.typed``). About 8 s of
CPU the first time, under a second with mypy's cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_finds_no_error_in_the_package():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_says_it_is_typed():
    assert (ROOT / "herdsim" / "py.typed").is_file()

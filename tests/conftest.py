"""Shared fixtures: a factory of tiny scenario dicts and the bundled scenarios' folder."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"

TINY = {
    "name": "tiny",
    "seed": 1,
    "duration": "2s",
    "workload": {"arrivals": "poisson", "rate": 50},
    "workers": {"count": 10},
    "downstream": {"concurrency": 4, "service": {"distribution": "exponential", "mean": "20ms"}},
    "retry": {"strategy": "exponential", "base": "50ms", "cap": "1s", "max_retries": 3},
}


def _merge(into: dict, changes: dict) -> dict:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def tiny(**changes) -> dict:
    """A small valid scenario dict (2 s, 10 workers), with *changes* merged section by section."""
    return _merge(copy.deepcopy(TINY), changes)


@pytest.fixture(scope="session")
def make_scenario():
    """``make_scenario(workload={"rate": 5}, ...)``: a tiny valid scenario dict.

    Session-scoped so that Hypothesis tests may use it.
    """
    return tiny


@pytest.fixture(scope="session")
def scenarios_dir() -> Path:
    """The repository's ``scenarios/`` folder."""
    return SCENARIOS

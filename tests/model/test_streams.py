"""The same seed gives identical outputs; strategies are compared on common random numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import herdsim

WALL_CLOCK_KEYS = {"wall_seconds", "calls_per_wall_second"}


@pytest.fixture(scope="module")
def busy(make_scenario) -> dict:
    """Every random stream in use: Poisson arrivals, poison, lognormal service, network
    delay, an error-rate outage, a down outage, timeouts, jittered retries, a budget."""
    return make_scenario(
        duration="6s",
        workload={"rate": 300, "poison_fraction": 0.05},
        workers={"count": 40},
        downstream={
            "concurrency": 8,
            "queue_limit": 10,
            "timeout": "150ms",
            "service": {"distribution": "lognormal", "mean": "20ms"},
            "network_delay": {"distribution": "exponential", "mean": "2ms"},
            "outages": [{"start": "1s", "duration": "1s", "mode": "error", "error_rate": 0.5},
                        {"start": "3s", "duration": "500ms", "mode": "down"}],
        },
        retry={"strategy": "full_jitter", "base": "20ms", "cap": "500ms", "max_retries": 4},
        budget={"kind": "adaptive", "window": "2s"},
    )


def saved(data: dict, out, overrides: dict | None = None):
    return herdsim.save(herdsim.run(herdsim.load_scenario(data, overrides)), out)


def summary_without_wall_clock(path) -> dict:
    summary = json.loads((path / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in WALL_CLOCK_KEYS}


@pytest.mark.slow
def test_one_seed_gives_identical_files(busy, tmp_path):
    first, second = saved(busy, tmp_path / "a"), saved(busy, tmp_path / "b")
    for name in ("timeseries.csv", "sleeps.csv", "scenario.yaml"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    pd.testing.assert_frame_equal(pd.read_parquet(first / "jobs.parquet"),
                                  pd.read_parquet(second / "jobs.parquet"))
    assert summary_without_wall_clock(first) == summary_without_wall_clock(second)
    summary = summary_without_wall_clock(first)
    assert summary["retries_total"] > 0 and summary["jobs_submitted"] > 1000


@pytest.mark.slow
def test_another_seed_gives_other_numbers(busy, tmp_path):
    first = saved(busy, tmp_path / "a")
    other = saved(busy, tmp_path / "b", {"seed": "2"})
    assert (first / "timeseries.csv").read_bytes() != (other / "timeseries.csv").read_bytes()
    assert (first / "sleeps.csv").read_bytes() != (other / "sleeps.csv").read_bytes()


@pytest.mark.parametrize("strategy", ["exponential", "decorrelated_jitter", "fixed"])
def test_changing_the_strategy_keeps_the_arrivals(busy, strategy):
    """Common random numbers: arrivals and poison flags do not depend on the strategy."""
    base = herdsim.run(herdsim.load_scenario(busy)).jobs
    other = herdsim.run(herdsim.load_scenario(busy, {"retry.strategy": strategy})).jobs
    pd.testing.assert_series_equal(base["arrival"], other["arrival"])
    pd.testing.assert_series_equal(base["poison"], other["poison"])


def test_without_failures_the_strategy_changes_nothing(make_scenario):
    """When no call ever fails, no strategy is ever asked for a sleep, so every output
    but the strategy's name is the same under any strategy."""
    calm = make_scenario(duration="3s", workload={"rate": 100}, workers={"count": 30},
                         downstream={"concurrency": 10})
    runs = [herdsim.run(herdsim.load_scenario(calm, {"retry.strategy": name}))
            for name in ("exponential", "full_jitter", "decorrelated_jitter_v2")]
    assert len(runs[0].sleeps) == 0
    for res in runs[1:]:
        pd.testing.assert_frame_equal(res.timeseries, runs[0].timeseries)
        pd.testing.assert_frame_equal(res.jobs, runs[0].jobs)

"""``--dilate K``: the dilated scenario is the same system on a slower clock. Simulated,
its counts are the scenario's and its times K times the scenario's (K a power of two:
every duration and rate scales exactly in binary floating point, so every event lands
in the same order and the same bin)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herdsim import run as simulate
from herdsim.config.loading import load_scenario
from herdsim.errors import TestbedError
from herdsim.testbed.dilation import dilate

SCENARIOS = Path(__file__).parents[2] / "scenarios"
SMALL = {"duration": "5s", "downstream.outages.0.start": "2s", "workers.count": 60,
         "workload.rate": 40, "downstream.concurrency": 12}
COUNTS = ("jobs_submitted", "jobs_succeeded", "jobs_dead_lettered", "jobs_pending",
          "attempts_total", "retries_total", "rejected_total", "timeouts_total")


def test_every_duration_is_k_times_and_every_rate_a_kth():
    sc = load_scenario(SCENARIOS / "testbed.yaml", {"downstream.rate_limit.rate": 250,
                                                     "downstream.retry_after": "limiter"})
    d = dilate(sc, 3)
    assert (d.duration, d.bin, d.peak_window) == pytest.approx(
        (3 * sc.duration, 3 * sc.bin, 3 * sc.peak_window))
    assert d.downstream.service.mean == pytest.approx(3 * sc.downstream.service.mean)
    assert d.downstream.timeout == pytest.approx(3 * sc.downstream.timeout)
    assert d.downstream.outages[0].start == pytest.approx(3 * sc.downstream.outages[0].start)
    assert (d.retry.base, d.retry.cap) == pytest.approx((3 * sc.retry.base, 3 * sc.retry.cap))
    assert d.workers.poll_interval == pytest.approx(3 * sc.workers.poll_interval)
    assert d.workload.rate == pytest.approx(sc.workload.rate / 3)
    assert d.downstream.rate_limit.rate == pytest.approx(250 / 3)
    assert d.downstream.retry_after == "limiter"
    # what has no unit of time stays
    assert (d.workers.count, d.downstream.concurrency, d.retry.max_retries, d.seed) == (
        sc.workers.count, sc.downstream.concurrency, sc.retry.max_retries, sc.seed)
    assert dilate(sc, 1) is sc


@pytest.mark.parametrize("k", [0.5, 0, 1000])
def test_a_factor_out_of_range_is_refused(k):
    sc = load_scenario(SCENARIOS / "testbed.yaml")
    with pytest.raises(TestbedError, match="^--dilate"):
        dilate(sc, k)


def _same_run_k_times_slower(sc, k: int) -> None:
    """Counts equal; every attempt, finish and sleep *k* times later (longer); the same
    counts in every bin *k* times wider. (Derived KPIs such as recovery_time judge over
    windows of absolute length, a second: the testbed reports a dilated run back in the
    scenario's units before it computes them.)"""
    plain, slow = simulate(sc), simulate(dilate(sc, k))
    for key in COUNTS:
        assert slow.summary[key] == plain.summary[key], key
    np.testing.assert_array_equal(slow.attempt_times, plain.attempt_times * k)
    np.testing.assert_array_equal(slow.jobs["finish"], plain.jobs["finish"] * k)
    np.testing.assert_array_equal(slow.sleeps["sleep"], plain.sleeps["sleep"] * k)
    for column in ("arrivals", "attempts", "retry", "success", "rejected", "timeouts"):
        np.testing.assert_array_equal(slow.timeseries[column], plain.timeseries[column])


def test_a_dilated_scenario_simulates_to_the_same_run_k_times_slower():
    _same_run_k_times_slower(load_scenario(SCENARIOS / "testbed.yaml", SMALL), 2)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([2, 4]), st.sampled_from(["fixed", "exponential", "full_jitter",
                                                  "decorrelated_jitter"]),
       st.sampled_from(["sleep", "requeue"]), st.integers(0, 1000))
def test_any_strategy_mode_and_seed_dilates_to_the_same_run(k, strategy, mode, seed):
    _same_run_k_times_slower(load_scenario(SCENARIOS / "testbed.yaml", {
        **SMALL, "retry.strategy": strategy, "workers.retry_mode": mode,
        "workers.poll_interval": "250ms", "seed": seed}), k)


@pytest.mark.parametrize(("option", "said"), [("--dilate=0", "--dilate 0: a factor"),
                                              ("--runs=0", "--runs 0: from 1")])
def test_a_bad_factor_or_run_count_is_one_line_exit_2_and_nothing_left(tmp_path, option,
                                                                        said):
    from typer.testing import CliRunner

    from herdsim.cli.app import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["testbed", "testbed", option, "--out", str(out)])
    assert result.exit_code == 2
    assert said in result.output and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output and not out.exists()

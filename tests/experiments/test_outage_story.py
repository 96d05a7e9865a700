"""The brief's story on the bundled scenarios/outage.yaml.

A 4 s blip fails every call in flight at once. Deterministic backoff (exponential, fixed)
brings the failed cohort back together and knocks the recovering downstream over again;
full jitter spreads it out, so the downstream stays up and the run recovers.
"""

from __future__ import annotations

import pytest

import herdsim

pytestmark = pytest.mark.slow  # the 3,000-worker story, run whole

STRATEGIES = ("exponential", "fixed", "full_jitter")


@pytest.fixture(scope="module")
def summaries(scenarios_dir) -> dict[str, dict]:
    """One run per strategy (~5 s each), same seed: common random numbers."""
    path = scenarios_dir / "outage.yaml"
    return {name: herdsim.run(herdsim.load_scenario(path, {"retry.strategy": name})).summary
            for name in STRATEGIES}


@pytest.mark.parametrize("strategy", ["exponential", "fixed"])
def test_synchronised_retries_knock_the_downstream_over_again(summaries, strategy):
    assert summaries[strategy]["collapses_after_outage"] >= 1


@pytest.mark.parametrize("strategy", ["exponential", "fixed"])
def test_synchronised_retries_peak_at_least_twice_as_high_as_full_jitter(summaries, strategy):
    assert summaries[strategy]["peak_to_capacity"] >= 2 * summaries["full_jitter"][
        "peak_to_capacity"]


def test_full_jitter_does_not_collapse_and_recovers(summaries):
    jitter = summaries["full_jitter"]
    assert jitter["collapses_after_outage"] == 0
    assert isinstance(jitter["recovery_time"], float) and jitter["recovery_time"] >= 0



@pytest.mark.parametrize("strategy", ["exponential", "fixed"])
def test_the_collapsed_runs_have_the_worse_tail_latency(summaries, strategy):
    """A run that never recovers leaves most of its jobs waiting: their age at the end is
    a lower bound of their latency, so its p99 must exceed the run that recovered (and is
    not flattered by the few jobs that happened to finish)."""
    assert summaries[strategy]["latency_p99"] > summaries["full_jitter"]["latency_p99"]


def test_the_stuck_arms_say_so_and_do_not_look_best(summaries):
    """Issue 11: exponential's 462,058 pending jobs made it look cheapest. Per succeeded job
    it burns more calls than full jitter, succeeds less, and its state says stuck."""
    jitter = summaries["full_jitter"]
    assert jitter["state"] == "recovered"
    for strategy in ("exponential", "fixed"):
        stuck = summaries[strategy]
        assert stuck["state"] == "metastable"
        assert stuck["amplification"] > jitter["amplification"]
        assert stuck["succeeded_fraction"] < jitter["succeeded_fraction"]
        assert stuck["goodput"] < 0.5 < jitter["goodput"]
        assert stuck["peak_to_baseline"] > 2 * jitter["peak_to_baseline"]

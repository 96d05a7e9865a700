"""The up-front time estimate (herdsim.planning.estimate.timing) against measured CPU time.

The estimate is a range: its low end takes one call per job, its high end the estimate's
upper bound of calls (every job taking all its retries), both at the calls per CPU second
measured on this machine by simulating :data:`CALIBRATION`. What the test allows, and why:
the measured CPU seconds of a run lie within [low / SLACK, high * SLACK], SLACK = 2. A
run's cost is not calls alone: arrivals, sleeps, the poller and the summary cost too, in
other shares than in the calibration run (measured on the bundled scenarios at 30 s: CPU
over the low end 0.9 (breaker, whose short-circuited jobs make less than one call each) to
7 (open loop, five calls per job, each job a process); CPU over the high end 0.13 to 1.3:
metastable.yaml, whose 3,000 workers and crashes cost beyond their calls), and the
calibration itself, 0.1 s of CPU on a shared machine, moves by some 20%. CPU time, not
wall time, so that waiting for a core does not count.
"""

from __future__ import annotations

import time

import pytest

import herdsim
from herdsim.config import bundled
from herdsim.planning import estimate

SLACK = 2.0


@pytest.mark.parametrize("name, overrides", [
    ("outage", {"retry.strategy": "full_jitter", "duration": "30s"}),  # ~1 call per job
    ("metastable", {}),  # 60 s of a storm that never ends: 3 calls per job, 3,000 workers
], ids=["outage-full_jitter", "metastable"])
@pytest.mark.slow
def test_measured_cpu_time_lies_in_the_estimated_range(name, overrides):
    """The speed is measured right before the run (not the process's cached figure), so
    that both see the same machine: CPU time itself grows when the other core is busy
    (the same metastable run took 0.37 s of CPU alone and 0.74 s beside the test suite)."""
    sc = herdsim.load_scenario(bundled.path(name), overrides)
    guess = estimate.estimate(sc)
    speed = estimate.calls_per_cpu_second.__wrapped__()
    took = estimate.Timing(guess.jobs / speed, guess.calls / speed, speed)
    started = time.process_time()
    herdsim.run(sc)
    cpu = time.process_time() - started
    assert took.likely / SLACK <= cpu <= took.most * SLACK, (took, cpu)


def test_short_runs_get_no_time_and_long_ones_do():
    """A run under WORTH_SAYING seconds even at its upper bound says nothing (and measures
    nothing); the bundled outage story (630,000 jobs, 4.4 million calls at most) does."""
    tiny = herdsim.load_scenario(bundled.path("retries"))  # 11,000 jobs
    assert estimate.timing([estimate.estimate(tiny)], measure=False) is None
    long = herdsim.load_scenario(bundled.path("outage"))
    took = estimate.timing([estimate.estimate(long)], measure=False)
    assert took is not None and took.speed == estimate.ASSUMED_SPEED
    assert took.likely == pytest.approx(630_000 / estimate.ASSUMED_SPEED)
    assert took.most == pytest.approx(630_000 * 7 / estimate.ASSUMED_SPEED)


def test_the_estimate_says_what_it_assumes():
    took = estimate.Timing(likely=30.0, most=300.0, speed=200_000.0, runs=4, at_once=2)
    text = took.describe()
    assert text.startswith("15 s to 2.5 min")  # 4 runs' CPU over 2 cores
    for words in ("each job calls about once", "every job takes all its retries",
                  "200,000 calls per CPU second measured on this machine",
                  "2 runs at a time", "saving and drawing not included"):
        assert words in text
    assert estimate.Timing(2.0, 2.0, 1e5).describe().startswith("2 s:")


@pytest.mark.parametrize("seconds, text", [(3.14, "3.1 s"), (42, "42 s"), (600, "10 min"),
                                           (9000, "2.5 h")])
def test_durations_read_in_the_unit_a_reader_expects(seconds, text):
    assert estimate.duration_text(seconds) == text


def test_unlimited_retries_are_said_to_be_an_assumption():
    """tenacity's preset retries forever at once: its high end counts 20 retries a job, an
    assumption, not a bound, and the text says so."""
    sc = herdsim.load_scenario(bundled.path("stacks"), {"retry.preset": "tenacity"})
    took = estimate.timing([estimate.estimate(sc)], measure=False)
    assert took is not None and took.assumed
    assert "20 where unlimited: more if they hammer a dead downstream" in took.describe()


def test_the_speed_is_measured_in_one_calibration_run(monkeypatch):
    """One run of :data:`CALIBRATION`, not two: ``herdsim run`` pays it before every long
    run, and a second run with warm caches measured within 10% of the first."""
    simulated = []
    real = estimate.family.simulate

    def counted(scenario, *args, **kwargs):
        simulated.append(scenario.name)
        return real(scenario, *args, **kwargs)

    monkeypatch.setattr(estimate.family, "simulate", counted)
    speed = estimate.calls_per_cpu_second.__wrapped__()
    assert simulated == ["calibration"]
    assert 1_000 < speed < 10_000_000  # calls per CPU second, on any machine that runs this


def test_the_calibration_is_short_and_measures_what_a_longer_one_does():
    """About 12,500 calls (``herdsim run`` pays for them before every long run), and the
    same speed as the calibration scenario run twice as long (outage and all moved with
    it): best of three each, within 20% (the doc's spread of one calibration on a shared
    machine; alone they agreed within 3%)."""
    def best_speed(scenario: dict) -> tuple[int, float]:
        sc = herdsim.load_scenario(scenario)
        runs = []
        for _ in range(3):
            started = time.process_time()
            calls = len(estimate.family.simulate(sc).recorder.attempts)
            runs.append(calls / max(time.process_time() - started, 1e-3))
        return calls, max(runs)

    short_calls, short = best_speed(estimate.CALIBRATION)
    downstream = dict(estimate.CALIBRATION["downstream"],
                      outages=[{"start": "10s", "duration": "1s", "mode": "down"}])
    long_calls, long = best_speed(dict(estimate.CALIBRATION, duration="40s",
                                       downstream=downstream))
    assert 10_000 < short_calls < 15_000 and long_calls > 1.9 * short_calls
    assert short == pytest.approx(long, rel=0.2)

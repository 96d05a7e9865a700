"""``workers.attempt_overhead`` as a service distribution (issue 40: the testbed's
measured turnaround): a constant one is the duration, a random one draws from a stream
of its own (the others do not shift), its mean is what each attempt costs on average,
and the work estimate reads its mean."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tiny

from herdsim import run
from herdsim.config.loading import validate
from herdsim.errors import ScenarioError
from herdsim.planning.estimate import estimate


def scenario(overhead, **changes):
    return validate(tiny(workers={"count": 10, "attempt_overhead": overhead}, **changes))


def test_a_constant_distribution_is_the_duration_it_holds():
    plain = run(scenario("4ms"))
    constant = run(scenario({"distribution": "constant", "mean": "4ms"}))
    np.testing.assert_array_equal(constant.attempt_times, plain.attempt_times)
    wall = ("wall_seconds", "calls_per_wall_second")  # the machine's, not the run's
    assert {k: v for k, v in constant.summary.items() if k not in wall} == \
        {k: v for k, v in plain.summary.items() if k not in wall}


def test_a_random_overhead_shifts_no_other_stream():
    """The arrivals and the poison marks are the same with and without it."""
    base = run(scenario(0.0, workload={"poison_fraction": 0.1}))
    drawn = run(scenario({"distribution": "exponential", "mean": "4ms"},
                         workload={"poison_fraction": 0.1}))
    np.testing.assert_array_equal(drawn.jobs["arrival"], base.jobs["arrival"])
    np.testing.assert_array_equal(drawn.jobs["poison"], base.jobs["poison"])
    assert not np.array_equal(drawn.attempt_times[:50], base.attempt_times[:50])


@pytest.mark.parametrize("dist", ["exponential", "lognormal"])
def test_one_worker_one_job_at_a_time_spends_the_mean_per_attempt(dist):
    """One worker, a backlog, an instant downstream that never fails: the attempts are
    spaced by the overhead alone, whose mean is the distribution's (400 draws:
    a relative standard error under 10% for sigma 1, so within 30%)."""
    sc = validate(tiny(duration="4s", workload={"arrivals": "poisson", "rate": 1,
                                                "backlog": 5000},
                       workers={"count": 1, "attempt_overhead": {
                           "distribution": dist, "mean": "10ms",
                           **({"sigma": 1.0} if dist == "lognormal" else {})}},
                       downstream={"concurrency": 1,
                                   "service": {"distribution": "constant", "mean": "1us"}}))
    gaps = np.diff(run(sc).attempt_times)
    assert gaps.size > 300
    assert gaps.mean() == pytest.approx(0.010 + 1e-6, rel=0.3)
    assert gaps.std() > 0.003  # drawn, not the mean each time


def test_a_field_the_distribution_does_not_read_is_refused_naming_it():
    with pytest.raises(ScenarioError, match="sigma"):
        scenario({"distribution": "exponential", "mean": "1ms", "sigma": 0.5})


def test_the_work_estimate_reads_a_distribution_by_its_mean():
    """Retries at once and without limit: the estimate counts one attempt per overhead;
    a distribution of mean 2 ms counts as 2 ms does (and 1 ms counts more)."""
    def guess(overhead):
        return estimate(validate(tiny(
            workers={"count": 10, "attempt_overhead": overhead},
            retry={"strategy": "immediate", "max_retries": None},
            downstream={"outages": [{"start": "1s", "duration": "500ms"}]})))

    as_duration = guess("2ms")
    as_mean = guess({"distribution": "lognormal", "mean": "2ms", "sigma": 1.0})
    assert as_mean == as_duration
    assert guess("1ms") != as_duration

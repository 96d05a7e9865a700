"""Jitter per job (the testbed's comparison): outside the mode a run is as it was;
inside it, retry n of job j sleeps what job j's own stream says, and the real workers'
retry step gives the same job the same sleep at the same retry."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tiny

from herdsim import run
from herdsim.config.loading import validate
from herdsim.model import job_streams
from herdsim.model.calls import ERROR
from herdsim.testbed.jobs import WireJob
from herdsim.testbed.timing import Clock, Lateness
from herdsim.testbed.workers import WorkerPool

OUTAGE = {"outages": [{"start": "500ms", "duration": "500ms"}]}


def scenario(strategy: str):
    return validate(tiny(retry={"strategy": strategy, "base": "50ms", "cap": "1s",
                                "max_retries": 5}, downstream=OUTAGE))


def test_outside_the_mode_nothing_changes_and_inside_only_the_sleeps_do():
    sc = scenario("full_jitter")
    plain, again = run(sc), run(sc)
    np.testing.assert_array_equal(plain.sleeps["sleep"], again.sleeps["sleep"])
    with job_streams.active():
        paired = run(sc)
    np.testing.assert_array_equal(paired.jobs["arrival"], plain.jobs["arrival"])
    assert not np.array_equal(paired.sleeps["sleep"][:20], plain.sleeps["sleep"][:20])


def test_each_sleep_is_its_jobs_own_draw_for_that_retry():
    """full jitter: sleep = min(cap, base * 2^n) * U, U the first number of the stream
    [seed, TAG, job, n]."""
    sc = scenario("full_jitter")
    with job_streams.active():
        sleeps = run(sc).sleeps
    assert len(sleeps) > 20
    for job, n, sleep in sleeps[["job", "attempt", "sleep"]].itertuples(index=False):
        u = np.random.default_rng([sc.seed, job_streams.TAG, int(job), int(n)]).random()
        assert sleep == pytest.approx(min(1.0, 0.05 * 2 ** n) * u, rel=1e-12)


@pytest.mark.parametrize("strategy", ["full_jitter", "equal_jitter", "decorrelated_jitter"])
def test_the_real_workers_draw_the_same_sleep_for_the_same_job_and_retry(strategy):
    """Every simulated sleep, replayed through a testbed worker process's retry step
    (the job's id, its retry count and its previous sleep as the simulation had them),
    comes out the same."""
    sc = scenario(strategy)
    with job_streams.active():
        sleeps = run(sc).sleeps
    pool = WorkerPool(sc, 10, 1, None, "", Clock(0.0), Lateness())
    prev: dict[int, float] = {}
    for t, job, n, sleep in sleeps[["time", "job", "attempt", "sleep"]].itertuples(
            index=False):
        wire = WireJob(int(job), False, int(n) + 1, int(n), prev.get(int(job), sc.retry.base))
        assert pool.retry(wire, float(t), ERROR, None) == pytest.approx(sleep, rel=1e-12)
        prev[int(job)] = wire.prev


# -- service times per job and attempt --------------------------------------------------

def test_outside_the_mode_the_service_stream_is_as_it_was():
    """The mode's service draw is chosen only inside it: outside, a run's latencies are
    the plain run's; inside, first tries are served for other times."""
    sc = validate(tiny())
    plain = run(sc)
    np.testing.assert_array_equal(run(sc).jobs["latency"], plain.jobs["latency"])
    with job_streams.active():
        paired = run(sc)
    assert not np.array_equal(paired.jobs["latency"][:20], plain.jobs["latency"][:20])


def test_a_first_try_is_served_for_its_jobs_own_draw():
    """No waiting anywhere (50 workers and 50 slots for 20 jobs/s of 20 ms): a job that
    succeeds at its first try takes exactly its service time, which in the mode is the
    draw of [seed, SERVICE_TAG, job, 1] by the scenario's distribution."""
    sc = validate(tiny(workload={"rate": 20}, workers={"count": 50},
                       downstream={"concurrency": 50}))
    with job_streams.active():
        jobs = run(sc).jobs
    first = jobs[(jobs["attempts"] == 1) & (jobs["outcome"] == "succeeded")]
    assert len(first) > 20
    for job, latency in first[["job", "latency"]].itertuples(index=False):
        u = np.random.default_rng([sc.seed, job_streams.SERVICE_TAG, int(job), 1])
        expected = float(sc.downstream.service.sampler(u)(1)[0])
        assert latency == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_each_served_attempt_draws_once_for_its_own_job_and_attempt(monkeypatch):
    """With retries (an error outage: failed attempts are served too), every service
    draw is keyed by a real attempt of a real job, and no attempt is drawn twice."""
    drawn: list[tuple[int, int]] = []
    inner = job_streams.service_time

    def spy(seed, service, job_id, attempt):
        drawn.append((job_id, attempt))
        return inner(seed, service, job_id, attempt)

    monkeypatch.setattr(job_streams, "service_time", spy)
    sc = validate(tiny(downstream={"concurrency": 10, "outages": [
        {"start": "500ms", "duration": "500ms", "mode": "error", "error_rate": 0.8}]}))
    with job_streams.active():
        jobs = run(sc).jobs
    attempts = dict(zip(jobs["job"], jobs["attempts"], strict=True))
    assert len(set(drawn)) == len(drawn)
    assert any(a > 1 for _, a in drawn)
    for job, attempt in drawn:
        assert 1 <= attempt <= attempts.get(job, sc.retry.max_retries + 1)

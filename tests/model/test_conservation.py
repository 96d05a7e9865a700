"""Conservation: every job ends in exactly one place, whatever the scenario.

Hypothesis draws small scenarios (<= 5 s, <= 60 workers or open-loop callers) across
every strategy, retry mode, outage mode, overload knob, breaker and budget, runs them,
and recounts the outcome of every job from independent sources: the jobs frame, the
time series, the sleeps, and the jobs still held by the simulation's containers.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

import numpy as np
import pytest
from conftest import assert_every_job_ends_in_one_place
from hypothesis import HealthCheck, given, settings
from small_scenarios import scenarios

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.results.result import Result


@contextmanager
def finishes_within(seconds: int):
    """Fail (rather than hang the suite) when a run takes more than *seconds* of wall time."""

    def stop(signum, frame):
        raise AssertionError(f"the run did not finish within {seconds} s of wall time")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=scenarios())
@pytest.mark.slow
def test_every_job_ends_in_exactly_one_place(data):
    sc = herdsim.load_scenario(data)
    sim = Simulation(sc)
    with finishes_within(10):
        res = assert_every_job_ends_in_one_place(sim, sim.run())  # no job finishes twice
    s, jobs, ts, sleeps = res.summary, res.jobs, res.timeseries, res.sleeps

    # succeeded + dead-lettered + pending, the pending ones recounted from the containers
    pending = sim.pending_jobs()
    pending_ids = [job.id for job in pending]
    assert len(set(pending_ids)) == len(pending_ids), "a job is in two places at once"
    assert s["jobs_submitted"] == len(jobs) == ts["arrivals"].sum()
    assert set(pending_ids) == set(jobs.loc[jobs["outcome"] == "pending", "job"])

    # keys: one job of a key in hand at a time, and the queue knows exactly those keys
    if sc.workload.keys is not None:
        held_keys = [job.key for job in sim.in_hand]
        assert len(set(held_keys)) == len(held_keys) and set(held_keys) == sim.queue.processing

    # a defended downstream's limiter counts exactly the calls in service or waiting; one
    # that sees a client's reset (Envoy's, a proxy) has let go of those whose client left,
    # and (without a network, where answers still on their way are live) holds every call
    # a client still waits for
    ds = sim.downstream
    if hasattr(ds, "held"):
        if getattr(ds.admission, "sees_client_reset", False):
            assert 0 <= ds.held <= ds.busy + ds.in_room()
            if sc.downstream.network_delay is None and sc.downstream.request_delay is None:
                assert len(ds.active) <= ds.held
        else:
            assert ds.held == ds.busy + ds.in_room()

    # finishing happens after arriving, within the run
    done = jobs[jobs["outcome"] != "pending"]
    assert (done["finish"] >= done["arrival"]).all()
    assert (done["finish"] <= sc.duration).all()
    assert jobs.loc[jobs["outcome"] == "pending", "finish"].isna().all()

    # the counters agree with one another
    assert jobs["attempts"].sum() == s["attempts_total"] == ts["attempts"].sum()
    assert ts["success"].sum() == s["jobs_succeeded"]
    assert ts["failed_dlq"].sum() == s["jobs_dead_lettered"]
    assert ts["retry"].sum() == len(sleeps) == s["retries_total"]

    # retry rules
    assert not jobs.loc[jobs["poison"], "outcome"].eq("succeeded").any()
    if not sc.dlq.enabled and sc.workers.count is not None:  # open loop always dead-letters
        assert s["jobs_dead_lettered"] == 0
    max_retries = sc.retry.max_retries
    if max_retries is not None:
        assert (sleeps["attempt"] < max_retries).all()
        if sc.dlq.enabled and sc.workload.keys is None:  # keyed: the key's count, which
            assert (jobs["attempts"] <= max_retries + 1).all()  # a success resets
    if not sc.retry.poison_retryable:
        poison_ids = jobs.loc[jobs["poison"], "job"]
        assert not sleeps["job"].isin(poison_ids).any()
    highest = sc.retry.cap * (1.2 if sc.retry.strategy == "proportional_jitter" else 1.0)
    if sc.retry.bucket is not None:  # the bucket's debt has no cap (controller-runtime #1594)
        highest = np.inf
    assert sleeps["sleep"].between(0, highest).all()

    # the gauges stay inside the downstream's limits
    ds = sc.downstream
    assert ts["in_flight"].between(0, ds.concurrency).all()
    if ds.queue_limit is not None:
        assert ts["waiting"].between(0, ds.queue_limit).all()
    assert (ts[["queue_depth", "delayed"]].to_numpy() >= 0).all()
    assert np.isin(ts["downstream_up"], [0.0, 1.0]).all()


@pytest.mark.parametrize("failing_fast", [
    {"outages": [{"start": "1s", "duration": "200ms", "mode": "down"}]},
    {"rate_limit": {"rate": 5, "burst": 1}},
    {"queue_limit": 0},
])
def test_no_dlq_with_calls_failing_fast_still_finishes(make_scenario, failing_fast):
    """Without a DLQ, a job out of retries goes back on the main queue. When its call
    failed fast (downstream down, waiting room full, rate limited) the run must still
    reach its end, with every job accounted for."""
    sc = herdsim.load_scenario(make_scenario(
        downstream=failing_fast, retry={"max_retries": 0}, dlq={"enabled": False}))
    sim = Simulation(sc)
    with finishes_within(2):
        res = Result.from_finished(sim.run())
    assert res.summary["jobs_pending"] == len(sim.pending_jobs())
    assert res.summary["recycled_total"] > 0

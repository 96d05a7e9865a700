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
from hypothesis import strategies as st

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.policies.strategies import BUILT_IN
from herdsim.results.result import Result

durations = st.floats(0.5, 5.0)
small_times = st.floats(0.001, 0.2)


def maybe(strategy):
    return st.none() | strategy


@st.composite
def outages(draw, duration: float, bin_width: float) -> dict:
    """An outage anywhere in the run, possibly ending with it."""
    start = draw(st.floats(0.0, duration - 0.02))
    length = draw(st.floats(0.01, duration - start))
    outage = {"start": start, "duration": length,
              "mode": draw(st.sampled_from(["down", "blackhole", "error", "slow"]))}
    if outage["mode"] == "error":
        outage["error_rate"] = draw(st.floats(0.05, 1.0))
    if outage["mode"] == "slow":
        outage["factor"] = draw(st.floats(0.2, 10.0))
    return outage


@st.composite
def collapses(draw) -> dict:
    threshold = draw(maybe(st.integers(1, 60)))
    load_limit = draw(st.integers(1, 40) if threshold is None else maybe(st.integers(1, 40)))
    return {"window": draw(st.floats(0.01, 0.5)), "threshold": threshold,
            "load_limit": load_limit, "restart_time": draw(st.floats(0.05, 2.0))}


@st.composite
def breakers(draw, scope: str) -> dict:
    return {"enabled": True, "scope": scope, "retries_only": draw(st.booleans()),
            "failure_rate_threshold": draw(st.floats(0.1, 1.0)),
            "window": draw(st.floats(0.1, 2.0)), "minimum_calls": draw(st.integers(1, 10)),
            "open_duration": draw(st.floats(0.05, 1.0)),
            "half_open_calls": draw(st.integers(1, 3))}


@st.composite
def budgets(draw, scope: str) -> dict:
    kind = draw(st.sampled_from(["token_bucket", "adaptive", "ratio"]))
    budget = {"kind": kind, "scope": scope, "window": draw(st.floats(0.1, 2.0))}
    if kind == "token_bucket":
        budget["preset"] = draw(st.sampled_from(["aws", "aws-1.43", "grpc"]))
    return budget


@st.composite
def defences(draw) -> dict:
    """A downstream's defences (herdsim.model.downstream.defences), or none."""
    fields: dict = {}
    discipline = draw(st.sampled_from(["fifo", "fifo", "lifo", "adaptive_lifo"]))
    fields["discipline"] = discipline
    if discipline == "adaptive_lifo":
        fields["lifo_threshold"] = draw(st.integers(1, 10))
    if draw(st.booleans()):
        fields["codel"] = {"target": draw(st.floats(0.001, 0.1)),
                           "interval": draw(st.floats(0.01, 0.5))}
    if draw(st.booleans()):
        fields["shedding"] = {"above": draw(st.integers(0, 10)),
                              "probability": draw(st.floats(0.0, 1.0))}
    kind = draw(st.sampled_from([None, "fixed", "aimd", "vegas", "gradient2", "envoy"]))
    if kind is not None:
        admission = {"kind": kind, "status": draw(st.sampled_from([503, 429]))}
        if kind == "fixed":
            admission["limit"] = draw(st.integers(1, 30))
        if kind == "envoy":
            admission["interval"] = draw(st.floats(0.01, 0.5))
            admission["min_rtt_interval"] = draw(st.floats(0.1, 3.0))
            admission["request_count"] = draw(st.integers(1, 20))
        fields["admission"] = admission
    return fields


@st.composite
def scenarios(draw) -> dict:
    """A valid small scenario dict. ``retry.base`` >= 10 ms keeps a job below ~500
    retries in 5 s, so every example runs in well under a second."""
    duration = draw(durations)
    bin_width = draw(st.sampled_from([0.05, 0.1, 0.25]))
    base = draw(st.floats(0.01, 0.5))
    outage_list = draw(st.lists(outages(duration, bin_width), max_size=3))
    timeout = draw(maybe(st.floats(0.005, 0.5)))
    if timeout is None and any(o["mode"] == "blackhole" for o in outage_list):
        timeout = draw(st.floats(0.005, 0.5))
    open_loop = draw(st.integers(0, 5)) == 0  # workers.count: null, a caller per job
    scope = "pool" if open_loop else draw(st.sampled_from(["worker", "pool"]))
    n_spikes = draw(st.integers(0, 2))
    edges = sorted(draw(st.lists(st.floats(0.0, duration * 0.9), min_size=2 * n_spikes,
                                 max_size=2 * n_spikes, unique=True)))
    spikes = [{"at": at, "duration": end - at, "rate": draw(st.floats(1.0, 400.0))}
              for at, end in zip(edges[::2], edges[1::2], strict=True)]
    count = None if open_loop else draw(st.integers(1, 60))
    steps = draw(st.integers(0, 3)) if draw(st.integers(0, 3)) == 0 else 0
    ats = sorted(draw(st.lists(st.floats(0.01, duration), min_size=steps, max_size=steps,
                               unique=True)))
    rate = draw(st.floats(1.0, 300.0))
    profile = [{"at": 0, "rate": rate}]  # a profile's first step is the rate
    for i, at in enumerate(ats):
        room = (ats[i + 1] if i + 1 < len(ats) else duration) - at
        profile.append({"at": at, "rate": draw(st.floats(0.0, 300.0)),
                        "ramp": draw(st.floats(0.0, room))})
    arrivals = draw(st.sampled_from(["poisson", "constant", "burst"]))
    autoscale = None
    if count is not None and draw(st.integers(0, 3)) == 0:
        autoscale = {"metric": draw(st.sampled_from(["queue_depth", "busy_fraction"])),
                     "target": draw(st.floats(0.1, 1.0)), "min": 1, "max": count + 20,
                     "interval": draw(st.floats(0.05, 1.0)),
                     "step_limit": draw(maybe(st.integers(1, 10))),
                     "cooldown": draw(st.floats(0.0, 1.0))}
    return {
        "name": "prop",
        "seed": draw(st.integers(0, 2**32 - 1)),
        "duration": duration,
        "bin": bin_width,
        "workload": {
            "arrivals": arrivals,
            "rate": rate,
            **({"burst_size": draw(st.integers(1, 40))} if arrivals == "burst" else {}),
            "backlog": draw(st.integers(0, 80)),
            "poison_fraction": draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0])),
            "queue_limit": draw(maybe(st.integers(1, 60))),
            "spikes": spikes,
            "profile": profile if steps else [],
            "keys": None if count is None else draw(maybe(st.integers(1, 30))),
        },
        "workers": {
            "count": count,
            "autoscale": autoscale,
            "retry_mode": "sleep" if open_loop else draw(st.sampled_from(["sleep", "requeue"])),
            "poll_interval": draw(st.floats(0.01, 1.0)),
        },
        "downstream": {
            "concurrency": draw(st.integers(1, 20)),
            "queue_limit": draw(maybe(st.integers(0, 20))),
            "service": {
                "distribution": draw(st.sampled_from(["constant", "exponential", "lognormal"])),
                "mean": draw(small_times),
            },
            "timeout": timeout,
            "network_delay": draw(maybe(st.fixed_dictionaries({
                "distribution": st.sampled_from(["constant", "exponential"]),
                "mean": st.floats(0.0005, 0.05)}))),
            "serve_abandoned": draw(st.booleans()),
            "rate_limit": draw(maybe(st.fixed_dictionaries({
                "rate": st.floats(5.0, 500.0), "burst": st.floats(1.0, 50.0)}))),
            "outages": outage_list,
            "overload": {
                "collapse": draw(maybe(collapses())),
                "latency_per_call": draw(st.sampled_from([0.0, 0.0, 0.001, 0.005])),
                "latency_model": draw(st.sampled_from(["at_start", "continuous"])),
            },
            **(draw(defences()) if draw(st.booleans()) else {}),
        },
        "retry": {
            "strategy": draw(st.sampled_from(sorted(BUILT_IN))),
            "base": base,
            "cap": base * draw(st.floats(1.0, 100.0)),
            "max_retries": draw(maybe(st.integers(0, 6))),
            "poison_retryable": draw(st.booleans()),
            "throttling": draw(st.lists(st.sampled_from([429, 503]), unique=True)),
            **({"retry_on": draw(st.lists(st.sampled_from(["timeout", "reset", 500, 503, 429]),
                                          unique=True))} if draw(st.integers(0, 3)) == 0 else {}),
            "bucket": draw(maybe(st.fixed_dictionaries({
                "rate": st.floats(1.0, 100.0), "burst": st.integers(1, 20)}))),
        },
        "client_limiter": draw(maybe(st.fixed_dictionaries({"kind": st.just("aws_adaptive"),
                                                            "scope": st.just(scope)}))),
        "dlq": {"enabled": draw(st.booleans()),
                "redelivery_delay": draw(st.floats(0.01, 1.0))},
        "breaker": draw(breakers(scope)) if draw(st.booleans()) else {"enabled": False},
        "budget": draw(maybe(budgets(scope))),
    }


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

"""More queueing theory (tests/model/test_queueing_theory.py has Erlang C, M/M/c/K and Little's
law for the slots): Erlang B and its insensitivity, Little's law for the whole system on
every run (outages included), and the retry model's 1 - p^(N+1) and sum of p^k.

Budget: about 15 s on one core.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

import herdsim

BIN = 0.001  # Little's law: sample the system every millisecond


# -- Erlang B -----------------------------------------------------------------------------


def erlang_b(servers: int, load: float) -> float:
    """Erlang's loss formula, as a ratio of Poisson terms: P(N = c) / P(N <= c)."""
    return float(stats.poisson.pmf(servers, load) / stats.poisson.cdf(servers, load))


def test_erlang_b_formula_matches_a_textbook_value():
    """B(c=1, a=1) = 1/2; B(2, 1) = (1/2) / (1 + 1 + 1/2) = 1/5."""
    assert erlang_b(1, 1.0) == pytest.approx(0.5)
    assert erlang_b(2, 1.0) == pytest.approx(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("distribution", ["exponential", "lognormal", "constant"])
def test_a_downstream_without_waiting_room_blocks_as_erlang_b(distribution):
    """``queue_limit: 0`` makes the downstream an M/G/c/c loss system. Fed by open-loop
    Poisson callers that never retry, the share of calls rejected is Erlang B(c, a),
    a = lambda E[S], whatever the service distribution (insensitivity; lognormal with
    sigma 1.5 is far from exponential). 8 replications of 300 s (~6,000 calls each,
    the first 5 s dropped, 25 mean service times); the theory value must lie in the
    99.9% Student-t interval of the replication means, so a correct model fails a reseed
    one time in a thousand, while the wrong law (Erlang C's waiting probability, 0.36
    here, against B = 0.20) is 30 standard errors away."""
    lam, servers, mean = 20.0, 5, 0.2
    data = {
        "name": "erlang-b", "duration": 300, "bin": 1.0,
        "workload": {"arrivals": "poisson", "rate": lam},
        "workers": {"count": None},
        "downstream": {"concurrency": servers, "queue_limit": 0,
                       "service": {"distribution": distribution, "mean": mean,
                                   **({"sigma": 1.5} if distribution == "lognormal" else {})}},
        "retry": {"max_retries": 0},
    }
    shares = []
    for seed in range(8):
        ts = herdsim.run(herdsim.load_scenario(data, {"seed": seed})).timeseries
        ts = ts[ts["time"] >= 5.0]
        shares.append(ts["rejected"].sum() / ts["attempts"].sum())
    low, high = stats.t.interval(0.999, len(shares) - 1, loc=np.mean(shares),
                                 scale=stats.sem(shares))
    assert low <= erlang_b(servers, lam * mean) <= high


# -- Little's law, every run --------------------------------------------------------------


@st.composite
def systems(draw) -> dict:
    """Small scenarios whose every job in the system shows in the gauges: no client
    timeout (doomed work would hold slots after its job moved on), no blackhole (calls
    hang outside the slots), no breaker (a worker waiting on it holds its job) and no
    network delay (answers in transit). Outages down/error/slow, crashes, rate limits,
    poison, both retry modes, open loop and DLQ off are all in."""
    duration = draw(st.integers(200, 2000)) * BIN
    outages = []
    for _ in range(draw(st.integers(0, 3))):
        start = draw(st.floats(0.0, duration * 0.9))
        outage = {"start": start, "duration": draw(st.floats(0.01, duration - start)),
                  "mode": draw(st.sampled_from(["down", "error", "slow"]))}
        if outage["mode"] == "error":
            outage["error_rate"] = draw(st.floats(0.05, 1.0))
        if outage["mode"] == "slow":
            outage["factor"] = draw(st.floats(0.5, 5.0))
        outages.append(outage)
    workers = draw(st.none() | st.integers(1, 40))
    data = {
        "name": "little", "seed": draw(st.integers(0, 2**32 - 1)), "duration": duration,
        "bin": BIN,
        "workload": {"arrivals": "poisson", "rate": draw(st.floats(5.0, 300.0)),
                     "backlog": draw(st.integers(0, 40)),
                     "poison_fraction": draw(st.sampled_from([0.0, 0.1, 0.5])),
                     "queue_limit": draw(st.none() | st.integers(1, 30))},
        "workers": {"count": workers,
                    "retry_mode": "sleep" if workers is None
                    else draw(st.sampled_from(["sleep", "requeue"])),
                    "poll_interval": draw(st.floats(0.01, 0.3))},
        "downstream": {
            "concurrency": draw(st.integers(1, 20)),
            "queue_limit": draw(st.none() | st.integers(0, 20)),
            "service": {"distribution": draw(st.sampled_from(["exponential", "constant",
                                                              "lognormal"])),
                        "mean": draw(st.floats(0.001, 0.1))},
            "outages": outages,
            "overload": {"latency_per_call": draw(st.sampled_from([0.0, 0.002]))},
        },
        "retry": {"strategy": draw(st.sampled_from(["fixed", "exponential", "full_jitter",
                                                    "decorrelated_jitter"])),
                  "base": draw(st.floats(0.005, 0.2)), "cap": 1.0,
                  "max_retries": draw(st.none() | st.integers(0, 5))},
        "dlq": {"enabled": draw(st.booleans()), "redelivery_delay": draw(st.floats(0.01, 0.5))},
    }
    if draw(st.booleans()):
        data["downstream"]["rate_limit"] = {"rate": draw(st.floats(10.0, 500.0)),
                                            "burst": draw(st.floats(1.0, 50.0))}
    if draw(st.booleans()):
        data["downstream"]["overload"]["collapse"] = {
            "window": 0.05, "threshold": draw(st.integers(5, 60)),
            "restart_time": draw(st.floats(0.05, 0.5))}
    return data


def _near(instants: np.ndarray, events: np.ndarray, eps: float = 1e-9) -> np.ndarray:
    """Mask of *instants* within *eps* of one of *events* (where event order is a tie)."""
    events = np.sort(events[np.isfinite(events)])
    if events.size == 0:
        return np.zeros(instants.size, dtype=bool)
    i = np.clip(np.searchsorted(events, instants), 1, events.size - 1)
    gap = np.minimum(np.abs(events[i - 1] - instants), np.abs(events[i] - instants))
    return (gap <= eps) | (np.abs(events[0] - instants) <= eps)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems())
def test_littles_law_holds_on_every_run(data):
    """L = lambda W on the sample path. L: the model's own count of jobs in the system
    (main queue + waiting to retry + calls waiting + calls in service), sampled every
    1 ms; lambda W: the job records, sum over jobs of (min(finish, T) - arrival) / T.

    Exactly, at every sample instant, the count equals arrivals so far minus jobs ended
    so far (except at instants where an arrival, an end, an outage edge, a crash or a
    poll coincides with the sample, where same-time ordering decides). Then the only
    gap between the two sides of Little's law is the sampling: each job's time in the
    system and its 1 ms samples differ by less than 1 ms, so
    |L - lambda W| <= n_jobs x 1 ms / T, plus the (measured) miscounts at the ties."""
    result = herdsim.run(herdsim.load_scenario(data))
    scenario, ts, jobs = result.scenario, result.timeseries, result.jobs
    at = ts["time"].to_numpy()
    model = (ts["queue_depth"] + ts["delayed"] + ts["in_flight"] + ts["waiting"]).to_numpy()
    arrival = np.sort(jobs["arrival"].to_numpy())
    finish = np.sort(jobs["finish"].fillna(np.inf).to_numpy())
    records = (np.searchsorted(arrival, at, side="right")
               - np.searchsorted(finish, at, side="right"))
    edges = [t for o in scenario.downstream.outages for t in (o.start, o.end)]
    polls = np.arange(0.0, scenario.duration + 1.0, scenario.workers.poll_interval)
    ties = _near(at, np.concatenate([arrival, finish, edges, result.crash_times, polls]))
    mismatch = np.flatnonzero((model != records) & ~ties)
    assert mismatch.size == 0, f"at t={at[mismatch[:5]]}: model {model[mismatch[:5]]}, " \
                               f"records {records[mismatch[:5]]}"

    horizon = len(at) * BIN
    occupancy = model.mean()
    lambda_w = (np.minimum(jobs["finish"].fillna(np.inf), horizon) - jobs["arrival"]).sum()
    lambda_w /= horizon
    slack = (len(jobs) * BIN + BIN * np.abs(model - records).sum()) / horizon
    assert abs(occupancy - lambda_w) <= slack + 1e-9


# -- the retry model ----------------------------------------------------------------------


@pytest.mark.parametrize("retries", [0, 1, 3])
@pytest.mark.parametrize("p", [0.25, 0.6, 0.9])
def test_independent_failures_follow_the_retry_model(p, retries):
    """Each call fails with probability p, independently (an ``error`` outage over the
    run, a downstream that never queues, open-loop callers). A job with N retries
    succeeds unless its N + 1 attempts all fail: 1 - p^(N+1); it makes
    1 + p + ... + p^N calls on average (attempt k+1 happens iff the first k failed).
    Jobs are independent, so the success count is binomial and the calls per job are
    i.i.d.: both theory values must lie in 99.9% intervals (Clopper-Pearson; Student t)
    of ~3,600 jobs. 18 such checks: a correct model fails a reseed about 2% of the time,
    while an off-by-one in the retry count (1 - p^N) misses by 10 to 60 standard
    errors."""
    data = {
        "name": "retry-model", "seed": 3, "duration": 11,
        "workload": {"arrivals": "poisson", "rate": 400},
        "workers": {"count": None},
        "downstream": {"concurrency": 10_000,
                       "service": {"distribution": "constant", "mean": 0.001},
                       "outages": [{"start": 0, "duration": 10, "mode": "error",
                                    "error_rate": p}]},
        "retry": {"strategy": "fixed", "base": 0.001, "max_retries": retries},
    }
    jobs = herdsim.run(herdsim.load_scenario(data)).jobs
    jobs = jobs[jobs["arrival"] < 9.0]  # every one of them ends inside the outage
    assert (jobs["outcome"] != "pending").all()
    succeeded = int((jobs["outcome"] == "succeeded").sum())
    ci = stats.binomtest(succeeded, len(jobs)).proportion_ci(confidence_level=0.999)
    assert ci.low <= 1 - p ** (retries + 1) <= ci.high
    calls = jobs["attempts"].to_numpy(dtype=float)
    half = stats.t.ppf(0.9995, len(calls) - 1) * stats.sem(calls)  # 0 with no retries
    assert abs(calls.mean() - sum(p**k for k in range(retries + 1))) <= half + 1e-12

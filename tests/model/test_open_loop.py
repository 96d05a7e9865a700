"""Open-loop callers (``workers.count: null``) against closed-loop workers, and theory.

Open loop: every arriving job is its own caller, so the number of calls in the system is
not capped by a pool, and the long-run call rate is the arrival rate times the calls per
job, whatever the backoff. Closed loop: W workers, each busy with one job at a time; a
worker asleep in a backoff makes no call, so backoff lowers the call rate. That is why
backoff helps serial callers much more than open-loop ones (M. Brooker, "What is Backoff
For?", 2022) -- the renewal arithmetic below makes it quantitative.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest

import herdsim
from herdsim.results.result import Result

P, N, SERVICE, BASE, CAP = 0.5, 4, 0.010, 0.010, 2.0
RATE, WORKERS = 2000.0, 50
START, END = 8.0, 25.0  # the measuring window, inside the failing period [5 s, 25 s)


def sleep_moments(strategy: str, n: int) -> tuple[float, float]:
    """Mean and variance of the sleep before retry n + 1 (docs/model.md, strategies)."""
    ceiling = min(CAP, BASE * 2**n)
    return {"fixed": (BASE, 0.0), "exponential": (ceiling, 0.0),
            "full_jitter": (ceiling / 2, ceiling**2 / 12)}[strategy]


def calls_law() -> list[tuple[int, float]]:
    """P(a job makes k calls): truncated geometric, k = 1..N+1."""
    return [(k, P ** (k - 1) * (1 - P) if k <= N else P**N) for k in range(1, N + 2)]


def closed_theory(strategy: str) -> tuple[float, float]:
    """Calls/s of W saturated workers and its standard deviation over the window.

    Each worker is a renewal-reward process: a job is a cycle of T = k * service + the
    k - 1 sleeps before its calls 2..k, rewarded with C = k calls. Rate: W * E[C] / E[T];
    the count over a window L has variance W * L * E[(C - r T)^2] / E[T], r = E[C]/E[T].
    """
    law = calls_law()
    cycle = [(k, q, k * SERVICE + sum(sleep_moments(strategy, n)[0] for n in range(k - 1)),
              sum(sleep_moments(strategy, n)[1] for n in range(k - 1))) for k, q in law]
    mean_c = sum(k * q for k, q in law)
    mean_t = sum(q * t for _, q, t, _ in cycle)
    r = mean_c / mean_t
    second = sum(q * ((k - r * t) ** 2 + r * r * var) for k, q, t, var in cycle)
    length = END - START
    return WORKERS * r, math.sqrt(WORKERS * length * second / mean_t) / length


def open_theory() -> tuple[float, float]:
    """Open loop: calls/s = rate * E[C] (compound Poisson), variance rate * L * E[C^2]."""
    law = calls_law()
    length = END - START
    mean_c = sum(k * q for k, q in law)
    second = sum(k * k * q for k, q in law)
    return RATE * mean_c, math.sqrt(RATE * length * second) / length


@cache
def measured_call_rate(strategy: str, count: int | None) -> float:
    """Calls/s in [START, END) when every call fails independently with probability P
    from 5 s to 25 s (after its full constant service time). 2,000 jobs/s is more than
    W = 50 workers can take under any of the strategies (<= 1,740 jobs/s), so the closed
    pool is saturated; in open loop ~40 calls are in service, far below the 200 slots."""
    data = {
        "name": "loops", "seed": 5, "duration": "26s",
        "workload": {"arrivals": "poisson", "rate": RATE},
        "workers": {"count": count},
        "downstream": {"concurrency": 200,
                       "service": {"distribution": "constant", "mean": SERVICE},
                       "outages": [{"start": "5s", "duration": "20s", "mode": "error",
                                    "error_rate": P}]},
        "retry": {"strategy": strategy, "base": BASE, "cap": CAP, "max_retries": N},
    }
    ts = herdsim.run(herdsim.load_scenario(data)).timeseries
    window = ts[(ts["time"] >= START) & (ts["time"] < END)]
    return float(window["attempts"].sum() / (END - START))


@pytest.mark.parametrize("strategy", ["fixed", "exponential", "full_jitter"])
@pytest.mark.slow
def test_call_rate_follows_renewal_theory_closed_and_open(strategy):
    """Closed loop: W * E[C] / E[T]; open loop: rate * E[C], whatever the backoff. Each
    within 4 standard deviations of its theory (computed above; 0.1-0.6% closed, 0.6%
    open), plus 0.5% for the transient after the failures start and the window edges."""
    expected, sd = closed_theory(strategy)
    assert abs(measured_call_rate(strategy, WORKERS) - expected) <= 4 * sd + 0.005 * expected
    expected, sd = open_theory()
    assert abs(measured_call_rate(strategy, None) - expected) <= 4 * sd + 0.005 * expected


@pytest.mark.slow
def test_backoff_cuts_closed_loop_load_much_more_than_open_loop_load():
    """Fixed 10 ms -> exponential backoff: the closed pool's call rate falls by the
    renewal ratio (3,370 -> 2,460 calls/s, x1.37); the open-loop call rate does not move
    (ratio 1): open-loop callers do not wait for each other, so backing off only
    postpones their calls, it does not remove them."""
    closed = measured_call_rate("fixed", WORKERS) / measured_call_rate("exponential", WORKERS)
    opened = measured_call_rate("fixed", None) / measured_call_rate("exponential", None)
    theory = closed_theory("fixed")[0] / closed_theory("exponential")[0]
    assert closed == pytest.approx(theory, rel=0.03) and theory > 1.3
    assert opened == pytest.approx(1.0, abs=0.03)


def test_open_loop_calls_in_flight_are_poisson_as_in_m_g_infinity(make_scenario):
    """No pool, ample slots, constant 100 ms service: the calls in service at any instant
    are those that arrived in the last 100 ms, Poisson(rate * 0.1) = Poisson(20)
    (M/G/inf). Samples 100 ms apart count disjoint arrivals, hence are independent: the
    mean of 190 samples is within 4 * sqrt(20/190) = 1.3 of 20, and their variance is
    ~20 (within 30%: the sd of a sample variance of 190 Poisson(20) draws is ~10%).
    A closed pool of 10 workers never has more than 10 in flight."""
    data = make_scenario(
        duration="20s", workload={"arrivals": "poisson", "rate": 200},
        workers={"count": None},
        downstream={"concurrency": 1000, "service": {"distribution": "constant",
                                                      "mean": "100ms"}})
    ts = herdsim.run(herdsim.load_scenario(data)).timeseries
    sample = ts.loc[ts["time"] >= 1.0, "in_flight"].to_numpy()
    assert abs(sample.mean() - 20) <= 4 * math.sqrt(20 / len(sample))
    assert sample.var(ddof=1) == pytest.approx(20, rel=0.3)
    assert (ts["queue_depth"] == 0).all()
    data["workers"]["count"] = 10
    closed = herdsim.run(herdsim.load_scenario(data)).timeseries
    assert closed["in_flight"].max() == 10


def test_an_open_loop_caller_calls_when_its_job_arrives(make_scenario):
    """No queue, no wait for a worker: a job's first call is made at its arrival."""
    data = make_scenario(workers={"count": None}, workload={"rate": 100})
    sim = herdsim.model.simulation.Simulation(herdsim.load_scenario(data))
    result = Result.from_finished(sim.run())
    arrivals = np.sort(result.jobs["arrival"].to_numpy())
    first_calls = np.sort(np.asarray(sim.recorder.attempts))[: len(arrivals)]
    assert len(result.sleeps) == 0  # nothing fails here
    np.testing.assert_allclose(first_calls, arrivals)


def test_an_open_loop_caller_refused_by_the_breaker_backs_off_instead_of_waiting(
        make_scenario):
    """With a pool breaker open, an open-loop caller counts a short-circuit as a failed
    try: it sleeps its backoff (a retry in ``sleeps``, no call made) or, out of its 3
    retries, is dead-lettered with fewer than 4 calls made -- and no call is made while
    the breaker is open."""
    data = make_scenario(
        duration="6s", workload={"rate": 200}, workers={"count": None},
        downstream={"concurrency": 50, "service": {"mean": "10ms"},
                    "outages": [{"start": "1s", "duration": "4s", "mode": "down"}]},
        retry={"strategy": "full_jitter", "base": "100ms", "cap": "1s", "max_retries": 3},
        breaker={"enabled": True, "scope": "pool", "window": "1s", "minimum_calls": 10,
                 "open_duration": "1s"})
    sim = herdsim.model.simulation.Simulation(herdsim.load_scenario(data))
    spans = []
    breaker = sim.gates[0].breaker
    listener = breaker.listener
    breaker.listener = lambda b, now: (spans.append((now, b.open_until))
                                       if b.state == "open" else None, listener(b, now))
    result = Result.from_finished(sim.run())
    s = result.summary
    assert s["calls_avoided"] > 0 and s["breaker_trips"] >= 1
    calls = np.asarray(sim.recorder.attempts)
    for start, end in spans:
        assert not ((calls > start) & (calls < end)).any()
    # Every try (a call or a short-circuit) ends in a success, a retry sleep or a dead
    # letter, except the calls still in flight at the end (pending jobs not asleep).
    tries = s["attempts_total"] + s["calls_avoided"]
    undecided = tries - s["jobs_succeeded"] - len(result.sleeps) - s["jobs_dead_lettered"]
    assert 0 <= undecided <= s["jobs_pending"]
    dead = result.jobs.query("outcome == 'dead_lettered'")
    assert (dead["attempts"] <= 4).all() and (dead["attempts"] < 4).any()

"""The downstream against queueing theory: M/M/c (Erlang C), M/M/c/K, Little's law.

Setup: Poisson arrivals, exponential service, no outage, ``max_retries: 0`` (a rejected
call is dead-lettered, never retried), and many more workers than the downstream can hold,
so every job calls at once when it arrives: the downstream sees an open Poisson stream.

Method: 5 replications (seeds 1-5), each trimmed of a warm-up of 100 s, i.e. more than 20
relaxation times ``1 / (c mu (1 - sqrt(rho))^2)`` (2.3 s at rho = 0.8, 4.1 s at 0.85), so
the start-up bias is negligible. A 95% Student-t confidence interval is built from the
5 replication means and widened by a tolerance of 3% of the theory value: the interval
alone misses a true value 5% of the time, and the tolerance makes a correct model very
unlikely to fail on a reseed, while the errors that matter stay far outside (one slot
fewer puts rho above 1; a service 10% slower more than doubles Lq: 2.39 -> 5.48).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import herdsim

pytestmark = pytest.mark.slow  # long runs against queueing theory

SEEDS = (1, 2, 3, 4, 5)
WARM_UP = 100.0  # s
TOLERANCE = 0.03  # relative to the theory value, see the module docstring
MEAN_SERVICE = 0.1  # s: mu = 10 calls/s per slot


def erlang_c_lq(lam: float, mu: float, c: int) -> float:
    """Mean number waiting (not in service) in an M/M/c queue."""
    a, rho = lam / mu, lam / (c * mu)
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / (math.factorial(c) * (1 - rho))
    wait_probability = tail / (head + tail)
    return wait_probability * rho / (1 - rho)


def mmck_blocking(lam: float, mu: float, c: int, k: int) -> float:
    """Probability that an arrival finds an M/M/c/K system full (K in service + waiting)."""
    a, rho = lam / mu, lam / (c * mu)
    weights = [a**n / math.factorial(n) for n in range(c + 1)]
    weights += [weights[c] * rho ** (n - c) for n in range(c + 1, k + 1)]
    return weights[-1] / sum(weights)


def mmc_runs(lam: float, c: int, queue_limit: int | None, duration: float,
             **downstream) -> list:
    """The time series of one run per seed (*downstream*: more fields of that section)."""
    data = {
        "name": "mmc",
        "duration": duration,
        "bin": 0.5,
        "workload": {"arrivals": "poisson", "rate": lam},
        "workers": {"count": 60},
        "downstream": {"concurrency": c, "queue_limit": queue_limit,
                       "service": {"distribution": "exponential", "mean": MEAN_SERVICE},
                       **downstream},
        "retry": {"max_retries": 0},
    }
    runs = []
    for seed in SEEDS:
        ts = herdsim.run(herdsim.load_scenario(data, {"seed": seed})).timeseries
        runs.append(ts[ts["time"] >= WARM_UP])
    return runs


def assert_in_interval(samples: list[float], theory: float) -> None:
    """*theory* lies in the 95% CI of the replication means, widened by TOLERANCE."""
    samples = np.asarray(samples)
    half = stats.t.ppf(0.975, len(samples) - 1) * samples.std(ddof=1) / math.sqrt(len(samples))
    low = samples.mean() - half - TOLERANCE * theory
    high = samples.mean() + half + TOLERANCE * theory
    assert low <= theory <= high, f"theory {theory:.4g} outside [{low:.4g}, {high:.4g}]"


def test_the_formulas_match_textbook_values():
    """Erlang C for a = 2, c = 3: P(wait) = 4/9, Lq = 8/9; M/M/1/1 blocking = rho/(1+rho)."""
    assert erlang_c_lq(2.0, 1.0, 3) == pytest.approx(8 / 9)
    assert mmck_blocking(0.5, 1.0, 1, 1) == pytest.approx(1 / 3)


@pytest.fixture(scope="module")
def open_mmc() -> list:
    """M/M/4 at rho = 0.8 (lambda 32/s, mu 10/s), 2,500 s per replication."""
    return mmc_runs(lam=32.0, c=4, queue_limit=None, duration=2500.0)


@pytest.fixture(scope="module")
def mmck() -> list:
    """M/M/4/8 (a waiting room of 4) at rho = 0.85, 2,000 s per replication."""
    return mmc_runs(lam=34.0, c=4, queue_limit=4, duration=2000.0)


def test_the_workers_never_hold_the_downstream_back(open_mmc):
    """The premise of the open model: a free worker takes every job when it arrives."""
    for ts in open_mmc:
        assert ts["queue_depth"].mean() < 1e-3


def test_mean_waiting_matches_erlang_c(open_mmc):
    theory = erlang_c_lq(32.0, 1 / MEAN_SERVICE, 4)
    assert_in_interval([ts["waiting"].mean() for ts in open_mmc], theory)


def test_rejected_fraction_matches_mmck_blocking(mmck):
    """By PASTA, the share of calls finding the system full is the blocking probability."""
    theory = mmck_blocking(34.0, 1 / MEAN_SERVICE, 4, 8)
    fractions = [ts["rejected"].sum() / ts["attempts"].sum() for ts in mmck]
    assert_in_interval(fractions, theory)
    for ts in mmck:
        assert ts["waiting"].max() <= 4


@pytest.fixture(scope="module")
def mmck_abandoned() -> list:
    """M/M/4/8 at rho = 0.85 again, but every client gives up after 20 ms (a fifth of a
    mean service) and the server still serves the calls they left: those keep their
    place in the waiting room, so what the server admits is still M/M/4/8."""
    return mmc_runs(lam=34.0, c=4, queue_limit=4, duration=2000.0, timeout=0.02,
                    serve_abandoned=True)


def test_the_bound_counts_abandoned_calls_that_still_wait(mmck_abandoned):
    """With ``serve_abandoned``, the waiting room's bound counts every waiting call: the
    blocking probability is M/M/c/K's. Counting only live callers (the bug) let the room
    grow without bound and rejected almost nothing."""
    theory = mmck_blocking(34.0, 1 / MEAN_SERVICE, 4, 8)
    fractions = [ts["rejected"].sum() / ts["attempts"].sum() for ts in mmck_abandoned]
    assert_in_interval(fractions, theory)


@pytest.mark.parametrize("runs", ["open_mmc", "mmck"])
def test_littles_law_holds_for_the_slots(runs, request):
    """Mean calls in service = throughput (successes per second) x mean service time."""
    ratios = []
    for ts in request.getfixturevalue(runs):
        bin_width = ts["time"].diff().iloc[-1]
        throughput = ts["success"].sum() / (len(ts) * bin_width)
        ratios.append(ts["in_flight"].mean() / (throughput * MEAN_SERVICE))
    assert_in_interval(ratios, 1.0)

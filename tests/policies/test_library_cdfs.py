"""The libraries' schedules' sleep distributions (``cdf``, herdsim/policies/backoff/
libraries.py) against their formulas and against their own samplers.

Several draw whole milliseconds or seconds: their ``cdf`` is a step function whose steps
sit where the sampler's arithmetic puts a sleep. SciPy's ``kstest`` assumes a continuous
distribution (at a tie it compares against the wrong side of a step), so the distance is
taken here exactly: the largest gap between the draws' empirical distribution and the
``cdf``, at every distinct draw and just below it (a step function's sup is at one of
those). Its p-value from the Kolmogorov distribution (``scipy.stats.kstwo``) is exact for
a continuous law and conservative for one with atoms (a discrete law's distance is
stochastically smaller), so a correct ``cdf`` fails at most at rate ALPHA.

ALPHA = 0.001 for about twenty cases, fixed seeds: a correct ``cdf`` fails for an unlucky
seed with a chance of about 2%, and a fixed seed makes that never flaky. With 2000 draws the
critical distance is 1.95 / sqrt(2000) ~ 0.044: a schedule off by one interval doubling
(a distance of 0.5) or one whole-ms step of a 25-step range (0.04 at every step) is caught.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from herdsim.policies.backoff import registry
from herdsim.policies.backoff.base import Ladder

ALPHA = 0.001
N_DRAWS = 2000
MS = 1000.0


def ks_pvalue(draws: np.ndarray, cdf) -> float:
    """The Kolmogorov-Smirnov p-value of *draws* against *cdf*, with the distance taken
    exactly for a law with atoms (see the module docstring)."""
    x = np.unique(draws)
    ordered = np.sort(draws)
    at = np.searchsorted(ordered, x, side="right") / draws.size  # F_n(x)
    below = np.searchsorted(ordered, x, side="left") / draws.size  # F_n(x-)
    left = np.nextafter(x, -np.inf)
    distance = max(np.abs(at - cdf(x)).max(), np.abs(below - cdf(left)).max())
    return float(stats.kstwo.sf(distance, draws.size))


def _kafka(term: float, jitter: float, max_ms: float):
    low, width = term * (1 - jitter), 2 * term * jitter
    return lambda x: np.where(x * MS >= max_ms, 1.0,
                              np.clip((np.floor(x * MS) + 1 - low) / width, 0.0, 1.0))


# name, params, base, cap, attempt, the formula's CDF (its own arithmetic, at points that
# are no sleep's value)
CASES = [
    ("immediate", {}, 0.1, 10.0, 3, lambda x: (x >= 0).astype(float)),
    # Sidekiq: n^4 + 15 + randint[0, 10 (n + 1))
    ("sidekiq", {}, 15.0, 1e9, 0, lambda x: stats.randint(0, 10).cdf(x - 15)),
    ("sidekiq", {}, 15.0, 1e9, 2, lambda x: stats.randint(0, 30).cdf(x - 31)),
    ("sidekiq", {}, 15.0, 40.0, 2,
     lambda x: np.where(x >= 40, 1.0, stats.randint(0, 30).cdf(x - 31))),
    # Celery: randint[0, min(600, 2^n)] whole seconds (both ends)
    ("celery", {}, 1.0, 600.0, 3, lambda x: stats.randint(0, 9).cdf(x)),
    ("celery", {}, 1.0, 600.0, 12, lambda x: stats.randint(0, 601).cdf(x)),
    ("celery", {"jitter": False}, 1.0, 600.0, 3, lambda x: (x >= 8).astype(float)),
    # Envoy 25 ms / 250 ms: intervals 25, 50, 100, 200, then 250 ms; randint[0, i) ms
    ("envoy", {}, 0.025, 0.25, 0, lambda x: stats.randint(0, 25).cdf(x * MS)),
    ("envoy", {}, 0.025, 0.25, 3, lambda x: stats.randint(0, 200).cdf(x * MS)),
    ("envoy", {}, 0.025, 0.25, 9, lambda x: stats.randint(0, 250).cdf(x * MS)),
    # gRPC connection backoff: 1 s exactly, then min(1.6^n, 120) * U(0.8, 1.2)
    ("grpc_connect", {}, 1.0, 120.0, 0, lambda x: (x >= 1.0).astype(float)),
    ("grpc_connect", {}, 1.0, 120.0, 3, stats.uniform(4.096 * 0.8, 4.096 * 0.4).cdf),
    ("grpc_connect", {}, 1.0, 120.0, 20, stats.uniform(96.0, 48.0).cdf),
    ("grpc_connect", {"jitter": 0.5}, 0.1, 5.0, 2, stats.uniform(0.128, 0.256).cdf),
    # cenkalti: I_n = min(60, 0.5 * 1.5^n) (cap once I_n >= cap / 1.5), * U(0.5, 1.5)
    ("cenkalti", {}, 0.5, 60.0, 2, stats.uniform(0.5625, 1.125 + 1e-9).cdf),
    ("cenkalti", {}, 0.5, 60.0, 30, stats.uniform(30.0, 60.0 + 1e-9).cdf),
    # Kafka 100 ms / 1 s: floor(100 * 2^min(n, log2 10) * U(0.8, 1.2)) ms, at most 1000
    ("kafka", {}, 0.1, 1.0, 1, _kafka(200.0, 0.2, 1000.0)),
    ("kafka", {}, 0.1, 1.0, 6, _kafka(1000.0, 0.2, 1000.0)),
    ("kafka", {"jitter": 0.0}, 0.1, 1.0, 1, lambda x: (x >= 0.2).astype(float)),
]


@pytest.mark.parametrize(("name", "params", "base", "cap", "attempt", "formula"), CASES,
                         ids=[f"{c[0]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_a_schedules_cdf_is_its_formula_and_its_draws(name, params, base, cap, attempt,
                                                      formula):
    strategy = registry.build(name, base, cap, params)
    top = cap if cap < 1e6 else 200.0
    grid = np.linspace(-0.5, top * 1.6, 801) + 0.000371  # between whole ms and seconds
    assert np.allclose(strategy.cdf(grid, attempt, base), formula(grid), atol=1e-9)
    rng = np.random.default_rng(20240501)
    draws = np.array([strategy.sleep(attempt, base, rng) for _ in range(N_DRAWS)])
    pvalue = ks_pvalue(draws, lambda x: strategy.cdf(x, attempt, base))
    assert pvalue > ALPHA, (name, attempt, pvalue)


@pytest.mark.parametrize("name", ["sidekiq", "celery", "envoy", "grpc_connect", "cenkalti",
                                  "kafka", "immediate"])
def test_a_schedules_cdf_broadcasts_over_attempts_as_the_sleep_plot_calls_it(name):
    """``analysis.theory.expected_counts`` calls ``cdf(edges[:, None], attempts[None, :],
    prevs[None, :])``: each column must be that attempt's own distribution."""
    strategy = registry.build(name, 0.5, 60.0, {})
    edges = np.linspace(0.0, 200.0, 97)
    attempts = np.array([0, 1, 2, 7, 40, 3])
    together = strategy.cdf(edges[:, None], attempts[None, :], np.full((1, 6), 0.5))
    for j, a in enumerate(attempts):
        alone = np.broadcast_to(strategy.cdf(edges, int(a), 0.5), edges.shape)
        assert np.array_equal(np.broadcast_to(together, (97, 6))[:, j], alone)


def test_a_ks_distance_taken_exactly_catches_a_cdf_one_step_off():
    """The test above can fail: Envoy's draws against the cdf of the next interval (twice
    as wide) and against one shifted by a single whole millisecond."""
    strategy = registry.build("envoy", 0.025, 0.25, {})
    rng = np.random.default_rng(20240501)
    draws = np.array([strategy.sleep(0, 0.025, rng) for _ in range(N_DRAWS)])
    assert ks_pvalue(draws, lambda x: strategy.cdf(x, 1, 0.025)) < ALPHA
    assert ks_pvalue(draws, lambda x: strategy.cdf(x - 0.001, 0, 0.025)) < ALPHA


class ShortLadder(Ladder):
    KEPT = 8  # so that walking past what is kept is exercised


@settings(max_examples=60, deadline=None)
@given(m=st.floats(1.0, 3.0), cap=st.floats(0.5, 1e4),
       attempts=st.lists(st.integers(0, 60), min_size=1, max_size=12))
def test_a_ladder_is_its_recurrence_walked_from_the_start(m, cap, attempts):
    """Envoy's, cenkalti's and gRPC's intervals come from a Ladder: at any attempt, and
    past what it keeps, it equals the loop the libraries write (cenkalti's recurrence)."""
    def step(v):
        return cap if v >= cap / m else v * m

    def walked(a):
        v = 0.5
        for _ in range(a):
            v = step(v)
        return v

    for ladder in (Ladder(0.5, step), ShortLadder(0.5, step)):
        assert [ladder.at(a) for a in attempts] == [walked(a) for a in attempts]
        many = ladder.many(np.array(attempts)[None, :])
        assert many.shape == (1, len(attempts))
        assert many[0].tolist() == [walked(a) for a in attempts]


@pytest.mark.parametrize("name", ["envoy", "cenkalti", "grpc_connect"])
def test_a_schedule_with_a_ladder_pickles_and_draws_the_same(name):
    """A strategy crosses process boundaries (pickle) and is copied: its intervals'
    ladder goes with it, mid-growth, and the copy draws the same sleeps."""
    import pickle

    strategy = registry.build(name, 0.1, 10.0, {})
    strategy.sleep(3, 0.1, np.random.default_rng(1))  # the ladder part-grown
    copy = pickle.loads(pickle.dumps(strategy))
    first, second = np.random.default_rng(2), np.random.default_rng(2)
    assert [strategy.sleep(a, 0.1, first) for a in range(40)] == \
        [copy.sleep(a, 0.1, second) for a in range(40)]

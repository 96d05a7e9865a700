"""Backoff strategies: bounds, distributions, determinism, the registry.

Every built-in is checked against the formula ``herdsim strategies`` prints, computed here
independently (exact fractions for the exponential ceiling, scipy for the uniforms).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

import herdsim
from herdsim.policies.backoff import Strategy
from herdsim.policies.backoff import registry as strategies

# One KS test per case below, about a dozen in all: at alpha = 0.001 each, the chance that
# some correct strategy fails for an unlucky seed is about 1%. With n = 2000 draws the KS
# critical distance at that alpha is 1.95/sqrt(n) ~ 0.044, so a formula that is off by 10%
# in scale or offset (a CDF distance of ~0.1) is still caught.
ALPHA = 0.001
N_DRAWS = 2000


def ceiling(base: float, cap: float, attempt: int) -> float:
    """``min(cap, base * 2**attempt)`` in exact arithmetic (no overflow at any attempt)."""
    return float(min(Fraction(cap), Fraction(base) * 2**attempt))


def polly_f(t):
    """Polly's DecorrelatedJitterBackoffV2 curve: ``2^t * tanh(sqrt(4 t))``."""
    return 2.0**t * np.tanh(np.sqrt(4.0 * t))


bases = st.floats(1e-3, 10.0)
cap_factors = st.floats(1.0, 1e4)
attempts = st.integers(0, 10_000)
seeds = st.integers(0, 2**32 - 1)


# -- bounds, for any attempt and prev -----------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(base=bases, cap_factor=cap_factors, attempt=attempts, seed=seeds)
def test_stateless_builtins_respect_their_bounds(base, cap_factor, attempt, seed):
    """Each sleep lies where its formula says, up to attempt 10,000 (no overflow)."""
    cap = base * cap_factor
    rng = np.random.default_rng(seed)
    v = ceiling(base, cap, attempt)
    build = strategies.build
    assert build("fixed", base, cap).sleep(attempt, base, rng) == base
    assert build("exponential", base, cap).sleep(attempt, base, rng) == pytest.approx(v)
    assert 0.0 <= build("full_jitter", base, cap).sleep(attempt, base, rng) <= v
    assert v / 2 <= build("equal_jitter", base, cap).sleep(attempt, base, rng) <= v
    s = build("proportional_jitter", base, cap).sleep(attempt, base, rng)
    assert 0.8 * v * (1 - 1e-12) <= s <= 1.2 * v * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(base=bases, cap_factor=cap_factors, attempt=attempts, prev_frac=st.floats(0, 1),
       seed=seeds)
def test_decorrelated_jitter_stays_between_base_cap_and_three_prev(
    base, cap_factor, attempt, prev_frac, seed
):
    """``min(cap, U(base, 3 prev))`` for any previous sleep in [base, cap]."""
    cap = base * cap_factor
    prev = base + prev_frac * (cap - base)
    s = strategies.build("decorrelated_jitter", base, cap).sleep(
        attempt, prev, np.random.default_rng(seed))
    assert base <= s <= min(cap, 3 * prev) * (1 + 1e-12)


@pytest.mark.parametrize(("base", "cap"), [(0.001, 0.001), (0.1, 30.0), (2.0, 1e6)])
def test_decorrelated_jitter_v2_chain_is_positive_and_capped(base, cap):
    """A job retrying without limit keeps getting sleeps in (0, cap], even past attempt 1000.

    A sleep is ``f(a + U) - f_prev`` scaled, and ``f`` is increasing, so every sleep of a
    chain is positive; a non-positive sleep would crash the worker's ``env.timeout``.
    """
    strategy = strategies.build("decorrelated_jitter_v2", base, cap)
    rng = np.random.default_rng(17)
    state = base
    for attempt in range(1_100):
        s, state = strategy.sleep(attempt, state, rng)
        assert 0.0 < s <= cap, f"attempt {attempt}: sleep {s}"


# -- deterministic strategies ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["fixed", "exponential"])
def test_deterministic_strategies_follow_the_seed_formula_and_draw_nothing(name):
    """fixed = base; exponential = min(cap, base 2^attempt) with attempt 0 the first retry
    (so the first sleep is ``base``); neither consumes random numbers."""
    base, cap = 0.1, 30.0
    strategy = strategies.build(name, base, cap)
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    got = [strategy.sleep(a, base, rng) for a in [*range(70), 10_000]]
    if name == "fixed":
        assert got == [base] * 71
    else:
        assert got[:4] == [0.1, 0.2, 0.4, 0.8]
        assert got == [ceiling(base, cap, a) for a in [*range(70), 10_000]]
    assert rng.bit_generator.state == before


# -- jittered strategies: the distribution of their formula -----------------------------------

JITTER_CASES = [
    # name, params, base, cap, attempt, prev, the formula's CDF
    ("full_jitter", {}, 0.1, 10.0, 0, 0.1, stats.uniform(0, 0.1).cdf),
    ("full_jitter", {}, 0.1, 10.0, 3, 0.1, stats.uniform(0, 0.8).cdf),
    ("full_jitter", {}, 0.1, 10.0, 12, 0.1, stats.uniform(0, 10.0).cdf),
    ("equal_jitter", {}, 0.1, 10.0, 0, 0.1, stats.uniform(0.05, 0.05).cdf),
    ("equal_jitter", {}, 0.1, 10.0, 4, 0.1, stats.uniform(0.8, 0.8).cdf),
    ("equal_jitter", {}, 0.1, 10.0, 12, 0.1, stats.uniform(5.0, 5.0).cdf),
    ("proportional_jitter", {}, 0.1, 10.0, 2, 0.1, stats.uniform(0.32, 0.16).cdf),
    ("proportional_jitter", {"jitter": 0.5}, 0.1, 10.0, 5, 0.1, stats.uniform(1.6, 3.2).cdf),
    ("decorrelated_jitter", {}, 0.1, 10.0, 0, 0.1, stats.uniform(0.1, 0.2).cdf),
    ("decorrelated_jitter", {}, 0.1, 10.0, 3, 1.0, stats.uniform(0.1, 2.9).cdf),
]


@pytest.mark.parametrize(("name", "params", "base", "cap", "attempt", "prev", "formula"),
                         JITTER_CASES)
def test_jittered_strategy_draws_from_its_formula(name, params, base, cap, attempt, prev,
                                                  formula):
    """The built-in ``cdf`` is the formula's, and draws pass a KS test against it.

    KS at alpha = 0.001 with 2000 draws and a fixed seed (see ``ALPHA`` for why).
    """
    strategy = strategies.build(name, base, cap, params)
    grid = np.linspace(-0.5, cap * 1.6, 801)
    assert np.allclose(strategy.cdf(grid, attempt, prev), formula(grid), atol=1e-12)
    rng = np.random.default_rng(20240501)
    draws = np.array([strategy.sleep(attempt, prev, rng) for _ in range(N_DRAWS)])
    result = stats.kstest(draws, lambda x: strategy.cdf(x, attempt, prev))
    assert result.pvalue > ALPHA, result


def test_decorrelated_jitter_piles_up_at_the_cap_as_its_formula_says():
    """With ``3 prev`` above the cap, ``min(cap, U(base, 3 prev))`` has an atom at the cap.

    KS needs a continuous CDF, so the two parts are tested apart: the share of draws at
    the cap with a two-sided binomial test, the draws below it with KS against the
    uniform truncated at the cap; alpha = 0.001 each, 2000 draws, fixed seed.
    """
    base, cap, prev = 0.1, 10.0, 5.0
    strategy = strategies.build("decorrelated_jitter", base, cap)
    uniform = stats.uniform(base, 3 * prev - base)
    grid = np.linspace(-0.5, 16.0, 801)
    assert np.allclose(strategy.cdf(grid, 5, prev),
                       np.where(grid >= cap, 1.0, uniform.cdf(grid)), atol=1e-12)
    rng = np.random.default_rng(20240501)
    draws = np.array([strategy.sleep(5, prev, rng) for _ in range(N_DRAWS)])
    at_cap = int((draws == cap).sum())
    assert stats.binomtest(at_cap, N_DRAWS, uniform.sf(cap)).pvalue > ALPHA
    result = stats.kstest(draws[draws < cap], stats.uniform(base, cap - base).cdf)
    assert result.pvalue > ALPHA, result


# -- Polly's decorrelated jitter v2 ------------------------------------------------------------


def _polly_inverse(y: float) -> float:
    """The t >= 0 with ``polly_f(t) == y`` (``polly_f`` is increasing)."""
    if y <= 0:
        return 0.0
    if y >= polly_f(64.0):
        return 64.0
    return optimize.brentq(lambda t: polly_f(t) - y, 0.0, 64.0, xtol=1e-13)


def _chains(base: float, cap: float, n_retries: int, n_chains: int, seed: int):
    strategy = strategies.build("decorrelated_jitter_v2", base, cap)
    rng = np.random.default_rng(seed)
    sleeps = np.empty((n_chains, n_retries))
    states = np.empty((n_chains, n_retries))
    for i in range(n_chains):
        state = base
        for a in range(n_retries):
            sleeps[i, a], state = strategy.sleep(a, state, rng)
            states[i, a] = state
    return sleeps, states


def test_decorrelated_jitter_v2_state_is_pollys_curve_and_sleeps_telescope():
    """The state after retry ``a`` is ``f(t)`` with ``t`` in [a, a+1), and uncapped sleeps
    add up to ``f(t) * base / 1.4`` (Polly's sleeps are differences of one curve)."""
    base = 0.2
    sleeps, states = _chains(base, 1e9, n_retries=12, n_chains=200, seed=5)
    a = np.arange(12)
    assert np.all(states >= polly_f(a)) and np.all(states < polly_f(a + 1.0))
    assert np.allclose(np.cumsum(sleeps, axis=1), states * base / 1.4, rtol=1e-9)


@pytest.mark.parametrize("retry", [0, 2, 5])
def test_decorrelated_jitter_v2_retry_times_follow_pollys_distribution(retry):
    """The time of retry ``k`` since the first failure is ``f(k + U) * base / 1.4``.

    Its CDF is ``clip(f^-1(1.4 x / base) - k, 0, 1)``; KS at alpha = 0.001 with 2000
    chains and a fixed seed (see ``ALPHA``).
    """
    base = 0.1
    sleeps, _ = _chains(base, 1e9, n_retries=retry + 1, n_chains=N_DRAWS, seed=11 + retry)
    elapsed = sleeps.sum(axis=1)
    inverse = np.vectorize(_polly_inverse)

    def cdf(x):
        return np.clip(inverse(1.4 * np.asarray(x) / base) - retry, 0.0, 1.0)

    result = stats.kstest(elapsed, cdf)
    assert result.pvalue > ALPHA, result


def test_decorrelated_jitter_v2_medians_are_near_base_times_powers_of_two():
    """Polly's scaling (1/1.4) puts the median first delay near ``base`` and the median
    time of retry ``k`` near ``base * 2^k``. Exactly: ``f(k + 0.5) / 1.4`` times base, i.e.
    0.90, 1.99, 4.03, 8.05 for k = 0..3; we accept 0.85-1.15 of ``base * 2^k``, which the
    sampling error of a median of 2000 draws (~2%) leaves inside."""
    base = 0.1
    sleeps, _ = _chains(base, 1e9, n_retries=4, n_chains=N_DRAWS, seed=2)
    medians = np.median(np.cumsum(sleeps, axis=1), axis=0)
    assert np.all(np.abs(medians / (base * 2.0 ** np.arange(4)) - 1) < 0.15), medians


def test_decorrelated_jitter_v2_is_capped():
    """With a cap below the curve, sleeps never exceed it (and stay positive)."""
    sleeps, _ = _chains(0.1, 0.5, n_retries=15, n_chains=100, seed=9)
    assert sleeps.max() == 0.5 and sleeps.min() > 0


# -- the strategies inside the engine ----------------------------------------------------------


def _always_failing(make_scenario, strategy: str, **retry) -> herdsim.Result:
    """Every job is poison: it fails every attempt and retries up to max_retries."""
    sc = make_scenario(
        duration="3s",
        workload={"arrivals": "constant", "rate": 5, "poison_fraction": 1.0},
        retry={"strategy": strategy, **retry},
    )
    return herdsim.run(herdsim.load_scenario(sc))


def test_engine_numbers_attempts_from_zero_for_the_first_retry(make_scenario):
    """In a run, job retries record attempt 0, 1, 2, 3 with exponential sleeps
    10, 20, 40 ms then the 50 ms cap, and the job is dead-lettered after 5 attempts."""
    res = _always_failing(make_scenario, "exponential", base="10ms", cap="50ms", max_retries=4)
    done = res.jobs[res.jobs["outcome"] == "dead_lettered"]
    assert len(done) > 0 and (done["attempts"] == 5).all()
    for _, job in res.sleeps[res.sleeps["job"].isin(done["job"])].groupby("job"):
        assert job["attempt"].tolist() == [0, 1, 2, 3]
        assert job["sleep"].tolist() == pytest.approx([0.01, 0.02, 0.04, 0.05])


def test_engine_carries_decorrelated_jitters_prev_per_job(make_scenario):
    """Each job's sleep is within [base, min(cap, 3 * its own previous sleep)]."""
    base, cap = 0.01, 0.5
    res = _always_failing(make_scenario, "decorrelated_jitter", base=base, cap=cap,
                          max_retries=6)
    assert len(res.sleeps) > 20
    for _, job in res.sleeps.sort_values(["job", "attempt"]).groupby("job"):
        prev = np.concatenate([[base], job["sleep"].to_numpy()[:-1]])
        s = job["sleep"].to_numpy()
        assert np.all(s >= base) and np.all(s <= np.minimum(cap, 3 * prev) * (1 + 1e-12))


def test_engine_survives_unlimited_retries_under_decorrelated_jitter_v2(make_scenario):
    """A poison job retried without limit (1 ms base and cap, 1 ms calls) passes its
    1000th retry within the run; every sleep drawn must stay in (0, cap]."""
    sc = make_scenario(
        duration="5s",
        workload={"arrivals": "constant", "rate": 1, "poison_fraction": 1.0},
        workers={"count": 2},
        downstream={"service": {"distribution": "constant", "mean": "1ms"}},
        retry={"strategy": "decorrelated_jitter_v2", "base": "1ms", "cap": "1ms",
               "max_retries": None},
    )
    res = herdsim.run(herdsim.load_scenario(sc))
    assert res.sleeps["attempt"].max() > 1001
    assert res.sleeps["sleep"].between(0, 0.001, inclusive="right").all()


# -- the registry --------------------------------------------------------------------------------


class HalfBase(Strategy):
    """A user's strategy found by import path: always half of base."""

    def sleep(self, attempt, prev, rng):
        return self.base / 2


class NoSleep:
    def __init__(self, base, cap):
        pass


def test_unknown_strategy_error_lists_the_known_names():
    with pytest.raises(ValueError) as info:
        strategies.resolve("exponentail")
    for name in strategies.BUILT_IN:
        assert name in str(info.value)


def test_unknown_strategy_in_a_scenario_names_the_field(make_scenario):
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(make_scenario(retry={"strategy": "exponentail"}))
    fields = [field for field, _ in info.value.problems]
    assert fields == ["retry.strategy"]
    assert "full_jitter" in str(info.value)


def test_strategy_by_import_path_runs_in_the_engine(make_scenario):
    """``module:Class`` loads a user's class; every sleep drawn in the run is its value."""
    res = _always_failing(make_scenario, f"{__name__}:HalfBase", base="20ms", cap="1s")
    assert len(res.sleeps) > 0
    assert (res.sleeps["sleep"] == 0.01).all()


@pytest.mark.parametrize("name", ["no_such_module_xyz:Thing", f"{__name__}:Missing",
                                  f"{__name__}:NoSleep"])
def test_bad_import_paths_are_rejected(make_scenario, name):
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(make_scenario(retry={"strategy": name}))
    assert info.value.problems[0][0] in {"retry.strategy", "retry.params"}


@pytest.mark.parametrize(("name", "params"), [
    ("proportional_jitter", {"jitter": 1.5}),
    ("proportional_jitter", {"jitter": -0.1}),
    ("fixed", {"factor": 2}),
])
def test_bad_params_are_rejected_naming_retry_params(make_scenario, name, params):
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(make_scenario(retry={"strategy": name, "params": params}))
    assert [field for field, _ in info.value.problems] == ["retry.params"]


def test_available_lists_every_builtin_with_its_formula():
    available = strategies.available()
    for name, cls in strategies.BUILT_IN.items():
        assert available[name] == cls.formula and cls.formula

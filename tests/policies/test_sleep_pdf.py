"""A strategy's fluid form (``sleep_pdf``) against its own draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from herdsim.policies.backoff import registry

STEP = 0.002
FLUID = ["fixed", "exponential", "full_jitter", "equal_jitter", "proportional_jitter",
         "immediate", "sidekiq", "celery", "envoy", "grpc_connect", "cenkalti", "kafka"]


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(FLUID), base=st.floats(0.01, 2.0), attempt=st.integers(0, 8))
@example(name="kafka", base=1.0, attempt=5)  # its fold of the rest came out -2.2e-16
def test_the_sleep_distribution_matches_the_draws(name, base, attempt):
    strategy = registry.build(name, base, 30.0, {})
    steps = int(50.0 / STEP)  # beyond the longest sleep (30 s x 1.5: cenkalti's)
    mass = strategy.sleep_pdf(attempt, STEP, steps)
    assert mass is not None and mass.min() >= 0 and mass.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(attempt)
    draws = np.sort([strategy.sleep(attempt, base, rng) for _ in range(4000)])
    # cell j holds the sleeps in ((j - 1/2) step, (j + 1/2) step] (a cdf's difference: a
    # whole-ms sleep on an edge is in the cell below): at those edges the fluid's
    # distribution function is exact, and the draws' may differ from it by the DKW bound
    # (alpha 1e-4: sqrt(ln(2 / alpha) / 2n); it holds for laws with atoms too)
    edges = (np.arange(steps) + 0.5) * STEP
    empirical = np.searchsorted(draws, edges, side="right") / draws.size
    bound = np.sqrt(np.log(2 / 1e-4) / (2 * draws.size))
    assert np.abs(np.cumsum(mass) - empirical).max() <= bound


@pytest.mark.parametrize("name", ["decorrelated_jitter", "decorrelated_jitter_v2"])
def test_a_strategy_without_a_fluid_form_gives_none(name):
    """Decorrelated jitter's sleep depends on the previous one (v2's on the previous
    draw): no distribution per retry alone."""
    assert registry.build(name, 0.1, 10.0, {}).sleep_pdf(0, STEP, 100) is None

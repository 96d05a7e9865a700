"""The fluid model's token bucket held to the simulation's own bucket under Poisson calls
(herdsim.policies.rate_limit.TokenBucket, the rule the downstream runs), to the reflected
random walk's loss at a load of one, and to what a deterministic cohort must take."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tiny

from herdsim.config.loading import load_scenario
from herdsim.fluid import inputs
from herdsim.fluid.bucket import CELLS, TokenLaw
from herdsim.fluid.integrate import integrate
from herdsim.policies.rate_limit import TokenBucket

RATE = 1000.0
DT = 0.002


def simulated(burst: float, load: float, seconds: float, seed: int) -> tuple[float, float]:
    """The share of Poisson calls at *load* per second a TokenBucket refuses, and the
    tokens the calls find on average (after the first tenth of the time)."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1 / load, int(load * seconds * 1.2)))
    times = times[(times < seconds)]
    bucket = TokenBucket(RATE, burst)
    refused = found = 0.0
    counted = 0
    for now in times.tolist():
        seen = min(burst, bucket.tokens + (now - bucket.last) * RATE)
        ok = bucket.take(now)
        if now > seconds / 10:
            counted += 1
            refused += not ok
            found += seen
    return refused / counted, found / counted


def fluid(burst: float, load: float, seconds: float) -> tuple[float, float]:
    """The same of the fluid's bucket, calls of random timing at *load* per second."""
    law = TokenLaw(RATE, burst, DT)
    steps = int(seconds / DT)
    offered = admitted = found = 0.0
    for i in range(steps):
        law.refill()
        seen = law.mean()
        let = law.take(load * DT, load * DT)
        if i > steps // 10:
            offered += load * DT
            admitted += let
            found += seen
    return 1 - admitted / offered, found / (steps - steps // 10 - 1)


@pytest.mark.parametrize(("burst", "load"), [(20, 900), (20, 1000), (20, 1100),
                                             (100, 1100)])
def test_poisson_calls_are_refused_as_the_simulations_bucket_refuses_them(burst, load):
    """Within 15% (and 0.002) of the share the bucket itself refuses over 100 s (at a load
    of one it is 1/(2 x burst), not the mean bucket's none), and the tokens the calls find
    within 2.5 of theirs (the law's are at the step's start, after its refill: up to the
    2 tokens of a step more)."""
    share, tokens = simulated(burst, load, 100.0, seed=7)
    law_share, law_tokens = fluid(burst, load, 100.0)
    assert law_share == pytest.approx(share, rel=0.15, abs=0.002)
    assert law_tokens == pytest.approx(tokens, abs=2.5)


@pytest.mark.parametrize("burst", [50, 100])
def test_at_a_load_of_one_the_loss_is_the_reflected_walks(burst):
    """Calls of random timing at exactly the rate: the tokens a random walk between empty
    and full with no drift and variance rate per second, refused at empty at its local
    time's rate, variance / (2 x burst): a share 1/(2 x burst) of the calls."""
    share, tokens = fluid(burst, RATE, 200.0)
    assert share == pytest.approx(1 / (2 * burst), rel=0.15)
    assert tokens == pytest.approx(burst / 2, rel=0.15)  # uniform between empty and full


def test_a_deterministic_cohort_takes_what_the_bucket_holds_and_no_more():
    law = TokenLaw(RATE, 100.0, DT)
    assert law.take(150.0, 0.0) == pytest.approx(100.0)  # a full bucket: its burst
    for _ in range(10):  # 20 ms: 20 tokens
        law.refill()
    assert law.take(5.0, 0.0) == pytest.approx(5.0)
    assert law.take(50.0, 0.0) == pytest.approx(15.0, abs=1.0)
    steady = TokenLaw(RATE, 100.0, DT)  # a flow at the rate, deterministic: all let in
    assert sum(steady.take(RATE * DT, 0.0) for _ in range(1000) if steady.refill() is None) \
        == pytest.approx(1000 * RATE * DT)


def test_a_huge_burst_is_coarsened_to_a_bounded_number_of_cells():
    law = TokenLaw(RATE, 1e12, DT)
    assert law.cells.size <= CELLS + 1
    assert law.take(5e11, 5e11) == pytest.approx(5e11, rel=1e-3)


def test_the_integration_refuses_poisson_calls_at_the_limit():
    """Poisson jobs at exactly the limit's rate, never retried: the fluid refuses about
    1/(2 x burst) of them, as the bucket does (a mean bucket refused none)."""
    data = tiny(duration="40s", workload={"arrivals": "poisson", "rate": 1000},
                workers={"count": 5000},
                downstream={"concurrency": 1000, "rate_limit": {"rate": 1000, "burst": 50},
                            "service": {"distribution": "exponential", "mean": "10ms"}},
                retry={"strategy": "fixed", "base": "1ms", "max_retries": 0})
    sc = load_scenario(data)
    grid = inputs.build(sc, DT)
    flows = integrate(sc, grid)
    late = slice(grid.n // 4, None)
    share = flows.rejected[late].sum() / flows.attempts[late].sum()
    assert share == pytest.approx(1 / (2 * 50), rel=0.2)

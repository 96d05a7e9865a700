"""Rate profiles: piecewise rates with linear ramps, generated exactly by inversion.

The counts of a Poisson process with rate λ(t) in disjoint intervals are independent
Poisson variables with means ∫λ; constant arrivals reach the integral to within one job.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

import herdsim
from herdsim.config.sections import Workload
from herdsim.errors import ScenarioError
from herdsim.model.streams import BLOCK
from herdsim.model.workload import ArrivalClock, Piecewise, SteadyClock, clock, gap

PROFILE = [{"at": "0s", "rate": 300}, {"at": "10s", "rate": 900, "ramp": "10s"},
           {"at": "25s", "rate": 0, "ramp": "5s"}, {"at": "32s", "rate": 500, "ramp": "4s"}]
SPIKE = {"at": "22s", "duration": "2s", "rate": 2000}


def rate_at(t: float) -> float:
    """The profile above with the spike, written out by hand."""
    if 22 <= t < 24:
        return 2000.0
    if t < 10:
        return 300.0
    if t < 20:
        return 300 + 60 * (t - 10)
    if t < 25:
        return 900.0
    if t < 30:
        return 900 - 180 * (t - 25)
    if t < 32:
        return 0.0
    if t < 36:
        return 125 * (t - 32)
    return 500.0


def _times(arrivals: str, until: float, seed: int = 7) -> np.ndarray:
    wl = Workload(arrivals=arrivals, profile=PROFILE, spikes=[SPIKE])
    rng = np.random.default_rng(seed)
    clk = clock(wl, lambda n: rng.exponential(1.0, n))
    out = []
    while clk.next_at < until:
        out.append(clk.next_at)
        clk.advance()
    return np.array(out)


@pytest.mark.parametrize("arrivals", ["poisson", "constant", "burst"])
def test_a_steady_clock_makes_the_general_clocks_sums(arrivals):
    """At one rate for good, the clock is a :class:`SteadyClock` (numpy sums a block at a
    time): the very times, bit for bit, that the general clock's gap-by-gap sums reach,
    across block boundaries, from the same stream; through ``advance`` and ``times``."""
    extra = {"burst_size": 3} if arrivals == "burst" else {}
    wl = Workload(arrivals=arrivals, rate=812.5, **extra)

    def sample(n):
        return stream.exponential(1.0, n)

    n = 3 * BLOCK + 17
    stream = np.random.default_rng(11)
    steady = clock(wl, sample)
    assert isinstance(steady, SteadyClock)
    fast = []
    for _ in range(n):
        fast.append(steady.next_at)
        steady.advance()
    stream = np.random.default_rng(11)
    general = ArrivalClock(wl, sample)
    times = general.times()
    assert fast == [next(times) for _ in range(n)]
    stream = np.random.default_rng(11)
    again = clock(wl, sample).times()
    assert fast == [next(again) for _ in range(n)]


def test_piecewise_schedule_is_the_profile_with_its_spike():
    schedule = Piecewise(Workload(profile=PROFILE, spikes=[SPIKE]))
    for t in np.arange(0, 40, 0.37):
        assert schedule.at(float(t))[0] == pytest.approx(rate_at(float(t)), abs=1e-9)


def test_poisson_counts_match_the_integral_of_the_rate():
    """Counts in 1 s intervals against ∫λ: a chi-square test of the Poisson means.

    Fixed seed; the statistic is compared with the 0.1 % upper quantile of chi-square with
    (intervals) degrees of freedom, so a correct generator fails once in 1,000 seeds,
    while an error of a few percent in the ramps (a rate off by half a slope) exceeds it
    many times over."""
    edges = np.arange(0.0, 41.0, 1.0)
    counts = np.histogram(_times("poisson", 40.0), bins=edges)[0]
    expected = np.array([integrate.quad(rate_at, a, a + 1.0, points=[22, 24, 25, 30, 32, 36],
                                        limit=200)[0] for a in edges[:-1]])
    assert counts[30:32].sum() == 0  # no arrival while the rate is zero
    keep = expected > 0
    chi2 = (((counts - expected) ** 2)[keep] / expected[keep]).sum()
    assert chi2 < stats.chi2.ppf(0.999, keep.sum())


def test_constant_arrivals_reach_the_integral_within_a_job_per_piece():
    """Constant arrivals place a job each time ∫λ grows by one (restarted at each piece's
    start): the count to any time is the integral to within one job per piece begun."""
    times = _times("constant", 40.0)
    for t in (5.0, 15.0, 21.9, 23.5, 27.0, 31.0, 35.0, 39.9):
        integral = integrate.quad(rate_at, 0, t, points=[10, 20, 22, 24, 25, 30, 32, 36],
                                  limit=200)[0]
        pieces = sum(1 for e in (0, 10, 20, 22, 24, 25, 30, 32, 36) if e < t)
        assert integral - pieces <= np.sum(times < t) <= integral + 1


# Subnormal rates and slopes (below 2.2e-308) carry a bit or two of precision: the check's
# own arithmetic (slope·g²/2 at g ~ 1e160) cannot hold there, and no ramp produces them.
@given(st.floats(0, 1e4, allow_subnormal=False), st.floats(-1e4, 1e4, allow_subnormal=False),
       st.floats(1e-3, 100))
def test_gap_integrates_the_rate_to_the_area(rate, slope, area):
    """gap(r, a, u) is where r·g + a·g²/2 reaches u (inf when the rate hits zero first)."""
    g = gap(rate, slope, area)
    if math.isinf(g):
        peak = rate * rate / (2 * -slope) if slope < 0 else 0.0
        assert (slope <= 0 and peak < area * (1 + 1e-9)) or (rate == 0 and slope == 0)
    else:
        assert rate + slope * g >= -1e-9 * max(1.0, abs(slope) * g)  # still a rate
        assert rate * g + slope * g * g / 2 == pytest.approx(area, rel=1e-9)


def test_a_run_with_a_profile_needs_no_rate_and_keeps_every_job():
    sc = herdsim.load_scenario({"name": "p", "duration": "40s", "seed": 3,
                                "workload": {"profile": PROFILE, "spikes": [SPIKE]},
                                "workers": {"count": 200},
                                "downstream": {"concurrency": 200,
                                               "service": {"mean": "10ms"}}})
    assert sc.workload.rate == 300
    res = herdsim.run(sc)
    assert res.timeseries["arrivals"].sum() == len(res.jobs)
    assert res.jobs["arrival"].between(30.0, 32.0, inclusive="neither").sum() == 0


@pytest.mark.parametrize("profile, field", [
    ([{"at": "1s", "rate": 5}], "workload.profile.0"),
    ([{"at": 0, "rate": 5, "ramp": "1s"}], "workload.profile.0"),
    ([{"at": 0, "rate": 0}], "workload.profile.0.rate"),
    ([{"at": 0, "rate": 5}, {"at": 0, "rate": 6}], "workload.profile.1.at"),
    ([{"at": 0, "rate": 5}, {"at": 2, "rate": 6, "ramp": 3}, {"at": 4, "rate": 1}],
     "workload.profile.1.ramp"),
])
def test_bad_profiles_name_the_step(profile, field):
    with pytest.raises(ScenarioError) as err:
        herdsim.load_scenario({"name": "p", "duration": "10s", "workload": {"profile": profile}})
    assert f"{field}:" in str(err.value) and "\n" not in str(err.value)


def test_a_rate_is_required_without_a_profile_or_trace():
    with pytest.raises(ScenarioError, match="workload.rate: required"):
        herdsim.load_scenario({"name": "p", "duration": "10s", "workload": {}})


def test_the_integral_of_the_schedule_is_the_rate_integrated():
    schedule = Piecewise(Workload(profile=PROFILE, spikes=[SPIKE]))
    for a, b in ((0, 40), (5, 21), (23, 31.5), (33, 34)):
        expected = integrate.quad(rate_at, a, b, points=[10, 20, 22, 24, 25, 30, 32, 36],
                                  limit=200)[0]
        assert schedule.integral(a, b) == pytest.approx(expected, rel=1e-9)

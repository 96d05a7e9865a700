"""aws-adaptive: botocore's client rate limiter against botocore's own test vectors and its
installed objects driven with the same clock."""

from __future__ import annotations

import numpy as np
import pytest
from botocore.exceptions import CapacityNotAvailableError
from botocore.retries import adaptive as boto_adaptive
from botocore.retries import bucket as boto_bucket
from botocore.retries import throttling as boto_throttling

import herdsim
from herdsim.policies import adaptive
from herdsim.policies.presets import get


def test_botocore_cubic_vectors():
    """tests/unit/retries/test_throttling.py of botocore: K for w_max = 10; a throttle at
    8 TPS gives 5.6 and K = 1.8171205928321397; at t = K the rate is back at w_max."""
    cubic = adaptive.CubicCalculator(starting_max_rate=10, start_time=0)
    assert cubic.k == pytest.approx(1.9574338205844317, abs=1e-15)
    assert cubic.success_received(cubic.k) == pytest.approx(10.0)
    assert cubic.success_received(cubic.k / 2) <= 10 <= cubic.success_received(cubic.k * 1.1)
    assert cubic.error_received(current_rate=8, timestamp=1) == pytest.approx(5.6)
    assert (cubic.w_max, cubic.k, cubic.last_fail) == (8, 1.8171205928321397, 1)
    beta = adaptive.CubicCalculator(starting_max_rate=10, start_time=0, beta=0.6)
    assert beta.error_received(current_rate=10, timestamp=1) == 6.0
    assert beta.success_received(1) == pytest.approx(6.0)


def test_botocore_rate_clocker_vectors():
    """tests/unit/retries/test_adaptive.py TestRateClocker: 0.8 after one second; a
    steady 1 TPS measures 1; counts grouped per 0.5 s bucket."""
    clocker = adaptive.RateClocker(0)
    assert clocker.record(1) == 0.8
    steady = adaptive.RateClocker(0)
    for t in range(1, 21):
        steady.record(t)
    assert steady.measured_rate == pytest.approx(1)
    grouped = adaptive.RateClocker(0)
    for t in (0.1, 0.2, 0.3, 0.4, 0.49):
        grouped.record(t)
    assert grouped.measured_rate == 0  # still in the first bucket: the previous rate
    assert grouped.record(0.5) == 12 * 0.8  # 6 in the 0.5 s bucket: 12 TPS, smoothed


class _Clock(boto_bucket.Clock):
    def __init__(self):
        self.now = 0.0

    def current_time(self):
        return self.now


class _Detector:
    def is_throttling_error(self, throttled, **kwargs):
        return throttled


def test_the_port_matches_botocore_driven_with_the_same_clock():
    """Botocore's own ClientRateLimiter, CubicCalculator, RateClocker and TokenBucket and
    the port see the same 5,000 events (responses, 30 % throttled, and non-blocking
    acquires) at the same random times: every rate, capacity and refusal is equal, to
    the last bit."""
    rng = np.random.default_rng(26)
    clock = _Clock()
    theirs = boto_adaptive.ClientRateLimiter(
        rate_adjustor=boto_throttling.CubicCalculator(starting_max_rate=0, start_time=0.0),
        rate_clocker=boto_adaptive.RateClocker(clock),
        token_bucket=boto_bucket.TokenBucket(max_rate=1, clock=clock),
        throttling_detector=_Detector(), clock=clock)
    ours = adaptive.ClientRateLimiter(0.0)
    refused = 0
    for _ in range(5000):
        clock.now += float(rng.exponential(0.05))
        if rng.random() < 0.5:
            throttled = bool(rng.random() < 0.3)
            theirs.on_receiving_response(throttled=throttled)
            ours.after_response(clock.now, throttled)
        elif ours.enabled:
            try:
                theirs._token_bucket.acquire(block=False)
                took = True
            except CapacityNotAvailableError:
                took = False
            assert (ours.before_send(clock.now) == 0.0) == took
            refused += not took
        assert theirs._enabled == ours.enabled
        assert theirs._token_bucket.max_rate == ours.bucket.max_rate
        assert theirs._token_bucket.max_capacity == ours.bucket.max_capacity
        assert theirs._token_bucket.available_capacity == ours.bucket.capacity
        assert theirs._rate_clocker.measured_rate == ours.clocker.measured_rate
        params = theirs._rate_adjustor.get_params_snapshot()
        assert (params.w_max, params.k, params.last_fail) == \
            (ours.cubic.w_max, ours.cubic.k, ours.cubic.last_fail)
    assert refused > 100  # the bucket was exercised, not always full


def test_the_wait_is_botocores_sleep_amount():
    """bucket.py's _sleep_amount: (amount - capacity) / fill rate."""
    bucket = adaptive.TokenBucket(max_rate=4, now=0.0)
    assert bucket.acquire(0.0) == pytest.approx(1 / 4)
    assert bucket.acquire(0.25) == 0.0
    bucket.set_max_rate(0.1, 0.25)  # fill rate floored at 0.5/s, capacity 1
    assert (bucket.fill_rate, bucket.max_capacity) == (0.5, 1)
    assert bucket.acquire(0.25) == pytest.approx(2.0)


SCENARIO = {"name": "adaptive", "duration": "16s", "seed": 1, "workload": {"rate": 300},
            "workers": {"count": 100},
            "downstream": {"concurrency": 200, "service": {"mean": "20ms"},
                           "rate_limit": {"rate": 250, "burst": 50},
                           "outages": [{"start": "8s", "duration": "2s"}]},
            "retry": {"preset": "aws-adaptive"}}


@pytest.mark.slow
def test_aws_adaptive_is_standard_until_the_first_throttle():
    """Same seed: aws-adaptive's calls are aws-standard's, call for call, until the first
    throttled answer; after it the client limiter holds the pool near the server's 250/s
    where standard mode keeps sending the offered 300/s and more."""
    adaptive_sc = herdsim.load_scenario(SCENARIO)
    standard_sc = herdsim.load_scenario(SCENARIO, overrides={"retry.preset": "aws-standard"})
    assert adaptive_sc.client_limiter is not None and standard_sc.client_limiter is None
    fields = get("aws-standard").fields
    assert {k: v for k, v in get("aws-adaptive").fields.items()
            if k != "client_limiter"} == fields
    ours, theirs = herdsim.run(adaptive_sc), herdsim.run(standard_sc)
    first = ours.timeseries.index[ours.timeseries["rejected"] > 0][0]  # its bin
    assert first > 0
    head = ["arrivals", "attempts", "success", "retry", "rejected"]
    assert ours.timeseries.loc[:first - 1, head].equals(theirs.timeseries.loc[:first - 1, head])
    assert not ours.timeseries.loc[:first, head].equals(theirs.timeseries.loc[:first, head])
    late = ours.timeseries["time"] >= 12
    assert ours.timeseries.loc[late, "attempts"].sum() / 4 < 270
    assert theirs.timeseries.loc[late, "attempts"].sum() / 4 > 300


def test_open_loop_callers_share_one_client():
    with pytest.raises(herdsim.ScenarioError, match="client_limiter.scope"):
        herdsim.load_scenario(SCENARIO, overrides={"workers.count": None,
                                                   "client_limiter.scope": "worker"})

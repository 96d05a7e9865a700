"""The retry budgets' fluid gates against their declared fluid forms."""

from __future__ import annotations

import pytest

from herdsim.policies.budgets.fluid import BucketGate, RatioGate
from herdsim.policies.budgets.token_bucket import PRESETS


def test_an_empty_aws_bucket_allows_refund_over_cost_retries_per_success():
    """``token_bucket``'s fluid form: once empty, retries at most success_refund /
    retry_cost per success (AWS: 1 / 14)."""
    gate = BucketGate(**PRESETS["aws"])
    assert gate.allow(1000.0, 0.0) == pytest.approx(500 / 14)  # the full bucket
    allowed = []
    for _ in range(200):  # 50 first tries succeed a step, 100 retries wanted
        allowed.append(gate.allow(100.0, 0.0))
        gate.heard(50.0, 50.0, 0.0, 100.0)
    assert allowed[-1] == pytest.approx(50 / 14, rel=1e-6)


def test_a_ratio_budget_holds_retries_to_ratio_times_first_tries_plus_its_floor():
    """``ratio``'s fluid form: over the window, retries <= ratio x first tries +
    min_per_second x window; in a steady storm the retry rate settles at it."""
    dt, window, ratio, floor = 0.01, 1.0, 0.2, 10.0
    gate = RatioGate(int(window / dt), ratio, floor * window)
    granted = []
    for _ in range(500):  # 5 s: 1,000 first tries/s, 10,000 retries/s wanted
        granted.append(gate.allow(100.0, 0.0))
        gate.heard(10.0, 10.0, 0.0, 100.0)
    last_second = sum(granted[-100:])
    assert last_second == pytest.approx(ratio * 1000 + floor, rel=0.02)

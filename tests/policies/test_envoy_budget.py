"""Envoy's circuit breakers and retry budget (``budgets/envoy.py``) against the rules of
Envoy's ``circuit_breaker.proto`` and envoy issue 30205 (retries in backoff are not
counted), and the envoy preset carrying them without changing what it did."""

from __future__ import annotations

import hashlib

import pytest
from conftest import tiny

import herdsim
from herdsim.config.loading import validate
from herdsim.model.simulation import Simulation
from herdsim.policies.budgets.envoy import Envoy


def limits(**fields):
    return Envoy(kind="envoy", **fields).build(lambda: 0.0)


def send(b, n, first):
    assert all(b.allow_call(0.0, first) for _ in range(n))


def test_max_retries_counts_retries_outstanding():
    """Three retries sent and unanswered: a fourth is refused; one answered: allowed."""
    b = limits()
    send(b, 10, True)
    for _ in range(3):
        assert b.allow_retry(0.0, False) == (True, 1.0)
        send(b, 1, False)
    assert b.allow_retry(0.0, False) == (False, 0.0)
    b.on_result(0.0, True, 1.0)
    assert b.allow_retry(0.0, False)[0]


def test_the_budget_is_a_share_of_calls_active_with_a_floor():
    """max(min_retry_concurrency, budget_percent / 100 × active): 20% of 100 active is
    20 retries; with nothing active the floor, 3."""
    b = limits(budget_percent=20, max_requests=None)
    assert b.retry_limit() == 3
    send(b, 80, True)
    for _ in range(20):
        assert b.allow_retry(0.0, False)[0]
        send(b, 1, False)
    assert b.active == 100 and b.retry_limit() == 20
    assert not b.allow_retry(0.0, False)[0]


def test_retries_in_backoff_are_not_counted_as_envoy_does():
    """envoy issue 30205: every retry decided while nothing is sent yet is allowed, so a
    20% budget lets 1,000 retries through; counting the backoff, the floor holds."""
    envoy = limits(budget_percent=20)
    assert all(envoy.allow_retry(0.0, False)[0] for _ in range(1000))
    counted = limits(budget_percent=20, count_backoff=True)
    assert sum(counted.allow_retry(0.0, False)[0] for _ in range(1000)) == 3


def test_a_call_beyond_max_requests_overflows():
    b = limits(max_requests=2, count_backoff=True)
    send(b, 2, True)
    assert b.allow_retry(0.0, False)[0] and b.retries == 1
    assert not b.allow_call(0.0, False)  # the retry overflows: no longer outstanding
    assert b.retries == 0 and b.active == 2


def test_counts_return_to_zero_in_a_run():
    """Every call counted is answered or still held by a job at the end, and every
    retry outstanding is a call active."""
    sc = validate(tiny(duration=10, budget={"kind": "envoy", "budget_percent": 20},
                       downstream={"outages": [{"mode": "down", "start": 2, "duration": 2}]}))
    sim = Simulation(sc)
    sim.run()
    budget = sim.budget_for(None)
    held = len(sim.in_hand)
    assert budget.active <= held and budget.retries <= budget.active


def test_the_breaker_and_an_envoy_budget_are_refused_together():
    with pytest.raises(herdsim.ScenarioError, match="envoy budget"):
        validate(tiny(budget={"kind": "envoy"}, breaker={"enabled": True}))


def test_the_envoy_preset_changes_nothing_where_its_breaker_never_binds():
    """Fast failures leave at most a few retries outstanding: the max_retries breaker
    never refuses one, and the frames are those of the preset without it."""
    def digest(budget):
        data = tiny(duration=10, retry={"preset": "envoy"},
                    downstream={"outages": [{"mode": "down", "start": 2, "duration": 2}]})
        sc = validate(data)
        if not budget:
            sc = sc.model_copy(update={"budget": None})
        res = herdsim.run(sc)
        assert res.summary["budget_refused_total"] == 0
        return hashlib.sha256(res.timeseries.to_csv().encode()).hexdigest()
    assert digest(True) == digest(False)

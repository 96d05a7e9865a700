"""The degradation members' rules: the lag against its closed form, the factors against
their formulas, and each member's fields its own."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from herdsim.policies.degradation import Contention, Degradations, Gc, Lag

ADAPTER = TypeAdapter(Degradations)


@given(tau=st.floats(0.01, 100), driver=st.floats(0, 1e4), t=st.floats(0, 500))
def test_a_step_of_the_driver_rises_as_one_minus_exp(tau, driver, t):
    """From rest, a step to x gives L(t) = x (1 - exp(-t / tau))."""
    lag = Lag(tau)
    lag.set(0.0, driver)
    assert lag.at(t) == pytest.approx(driver * (1 - math.exp(-t / tau)), rel=1e-9, abs=1e-9)


@given(tau=st.floats(0.01, 100), start=st.floats(0, 1e3),
       cuts=st.lists(st.floats(0, 50), min_size=1, max_size=20))
def test_reading_the_lag_often_changes_nothing(tau, start, cuts):
    """The level is a function of time alone while the driver holds: reading it at any
    points on the way (as every service start does) lands where one read does, and after
    the load falls it decays as start × exp(-t / tau)."""
    lag = Lag(tau, start)
    lag.set(0.0, 0.0)
    for t in sorted(cuts):
        lag.at(t)
    end = max(cuts)
    assert lag.at(end) == pytest.approx(start * math.exp(-end / tau), rel=1e-9, abs=1e-9)


def test_gc_factor_is_live_over_free():
    gc = ADAPTER.validate_python({"kind": "gc", "memory_per_call": 0.5, "heap": 1000,
                                  "baseline": 100, "cost": 2, "recovery": "5s",
                                  "max_factor": 50})
    assert isinstance(gc, Gc)
    assert gc.driver(100, 300) == 100 + 0.5 * 400
    assert gc.factor(300.0) == pytest.approx(1 + 2 * 300 / 700)
    assert gc.factor(999.99) == 50  # capped near a full heap
    assert gc.factor(1000.0) == gc.factor(5000.0) == 50  # and beyond it


def test_contention_counts_what_of_says():
    member = {"kind": "contention", "per_call": 0.1, "free": 4, "recovery": "1s"}
    for of, expected in (("in_service", 10), ("waiting", 7), ("held", 17)):
        c = ADAPTER.validate_python({**member, "of": of})
        assert isinstance(c, Contention)
        assert c.driver(10, 7) == expected
    c = ADAPTER.validate_python(member)
    assert c.factor(3.0) == 1.0
    assert c.factor(14.0) == pytest.approx(2.0)
    assert c.factor(1e9) == c.max_factor


@pytest.mark.parametrize("data, words", [
    ({"kind": "gc", "memory_per_call": 1, "heap": 10, "recovery": "1s", "per_call": 0.1},
     "only a contention degradation has per_call (this one is kind: gc)"),
    ({"kind": "contention", "per_call": 0.1, "recovery": "1s", "heap": 10},
     "only a gc degradation has heap (this one is kind: contention)"),
    ({"kind": "gc", "memory_per_call": 1, "heap": 10, "baseline": 10, "recovery": "1s"},
     "must be below the heap"),
    ({"kind": "gc", "memory_per_call": 1, "heap": 10, "recovery": "1s",
      "max_factor": 1e6}, "less than or equal to 1000"),
    ({"kind": "swap", "recovery": "1s"}, "unknown kind 'swap': one of gc, contention"),
])
def test_a_member_refuses_fields_it_does_not_read(data, words):
    with pytest.raises(ValidationError, match=re.escape(words)):
        ADAPTER.validate_python(data)

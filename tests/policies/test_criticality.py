"""The classed waiting room (``policies/criticality.py``): by property, ``popleft``
serves calls in the order of a stable sort by class (oldest first within one), ``pop``
the newest of the highest class, and ``lowest`` the newest of the lowest class below;
the factors that raise a defence's threshold by class never favour a lower class."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herdsim.policies.criticality import CLASSES, ClassedRoom, Mix
from herdsim.policies.shedding import Probabilistic

calls = st.lists(st.integers(0, len(CLASSES) - 1), max_size=40)


def filled(classes):
    room = ClassedRoom(lambda c: c[1])
    items = list(enumerate(classes))
    for item in items:
        room.append(item)
    return room, items


@given(calls)
def test_popleft_is_a_stable_sort_by_class(classes):
    room, items = filled(classes)
    assert len(room) == len(items)
    out = [room.popleft() for _ in range(len(items))]
    assert out == sorted(items, key=lambda item: item[1]) and not room


@given(calls)
def test_pop_takes_the_newest_of_the_highest_class(classes):
    room, items = filled(classes)
    if items:
        top = min(classes)
        assert room.pop() == [item for item in items if item[1] == top][-1]


@given(calls, st.integers(-1, len(CLASSES) - 1))
def test_lowest_below_a_class(classes, above):
    room, items = filled(classes)
    below = [item for item in items if item[1] > above]
    expected = None
    if below:
        worst = max(item[1] for item in below)
        expected = [item for item in below if item[1] == worst][-1]
    assert room.lowest(above) == expected


shares = st.lists(st.sampled_from([0.0, 0.5, 1.0, 7.0]), min_size=4, max_size=4).filter(any)


@given(shares, st.floats(0, 100))
def test_the_factors_never_favour_a_lower_class(weights, step):
    """Highest class first, the factors never rise; the lowest class present has 1, each
    class present above it exactly 1 + step × the classes present below it."""
    mix = Mix(**dict(zip(CLASSES, weights, strict=True)), step=step)
    factors = mix.factors()
    assert all(a >= b for a, b in zip(factors, factors[1:], strict=False))
    present = [k for k, w in enumerate(weights) if w > 0]
    assert factors[present[-1]] == 1.0
    for rank, k in enumerate(reversed(present)):
        assert factors[k] == pytest.approx(1 + step * rank)


@given(st.integers(0, 10_000), st.floats(1, 101))
def test_shedding_raised_for_a_higher_class_sheds_no_sooner(above, factor):
    """A raised rule's depth is never below the rule's, and at factor 1 it is the rule."""
    rule = Probabilistic(above=above, probability=0.0)
    assert rule.raised(factor).above >= above
    assert rule.raised(1.0) == rule

"""The classed waiting room (``policies/criticality.py``): by property, ``popleft``
serves calls in the order of a stable sort by class (oldest first within one), ``pop``
the newest of the highest class, and ``lowest`` the newest of the lowest class below."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from herdsim.policies.criticality import CLASSES, ClassedRoom

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

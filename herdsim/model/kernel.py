"""The one module that knows SimPy's internals (simpy 4.x, pinned below 5 in pyproject).

* :class:`Environment` reads the clock as fast as SimPy does itself. ``simpy.Environment``
  keeps the time in ``_now`` behind a ``now`` property, and on CPython 3.11 the property
  costs a Python call on every read, several per downstream call. Here ``_now`` is a slot
  and ``now`` is the same slot under its public name: the same value, no call.
* :func:`trigger_later` fires an event that already has waiters after *delay* with
  *value*, the one scheduled event a ``Timeout`` would cost (``Event.succeed`` can only
  fire now).
"""

from __future__ import annotations

import simpy


class Environment(simpy.Environment):
    """``simpy.Environment`` whose ``now`` is a plain slot read (see the module docstring)."""

    __slots__ = ("_now",)


Environment.now = Environment.__dict__["_now"]  # the slot's descriptor, under its public name


def trigger_later(env: simpy.Environment, event: simpy.Event, value, delay: float) -> None:
    """Make *event* succeed with *value* at ``now + delay`` (it must not be triggered)."""
    event._ok = True
    event._value = value
    env.schedule(event, delay=delay)

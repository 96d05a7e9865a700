"""The one module that knows SimPy's internals (simpy 4.x, pinned below 5 in pyproject).

* :class:`Environment` reads the clock as fast as SimPy does itself. ``simpy.Environment``
  keeps the time in ``_now`` behind a ``now`` property, and on CPython 3.11 the property
  costs a Python call on every read, several per downstream call. Here ``_now`` is a slot
  and ``now`` is the same slot under its public name: the same value, no call.
* :meth:`Environment.run_until` is ``run(until=at)`` with ``step`` inlined: one Python
  frame for the whole run instead of a call per event. It stops at an ``URGENT`` stop
  event scheduled when it is called, as ``run`` does, so it processes the same events in
  the same order. SimPy binds ``timeout``, ``process`` … to an instance only for the
  names in the instance's own class; the inherited ones are bound here too, or every
  ``env.timeout`` would build a bound method.
* :func:`trigger_later` fires an event that already has waiters after *delay* with
  *value*, the one scheduled event a ``Timeout`` would cost (``Event.succeed`` can only
  fire now).
"""

from __future__ import annotations

from heapq import heappop

import simpy
from simpy.core import URGENT, BoundClass


class Environment(simpy.Environment):
    """``simpy.Environment`` whose ``now`` is a plain slot read, with an inlined run loop
    (see the module docstring)."""

    __slots__ = ("_now",)

    def __init__(self, initial_time: float = 0):
        super().__init__(initial_time)
        for name, obj in vars(simpy.Environment).items():
            if type(obj) is BoundClass:
                setattr(self, name, getattr(self, name))

    def run_until(self, at: float) -> None:
        """Process every event before *at* (as ``run(until=at)`` does), then stop."""
        if at <= self._now:
            raise ValueError(f"until ({at}) must be greater than the current simulation time")
        stop = simpy.Event(self)
        stop._ok = True
        stop._value = None
        self.schedule(stop, URGENT, at - self._now)
        queue = self._queue
        while True:
            self._now, _, _, event = heappop(queue)
            if event is stop:
                stop.callbacks = None
                return
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                # A failed event nobody handled crashes the run, as in ``step``.
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc


Environment.now = Environment.__dict__["_now"]  # the slot's descriptor, under its public name


def trigger_later(env: simpy.Environment, event: simpy.Event, value, delay: float) -> None:
    """Make *event* succeed with *value* at ``now + delay`` (it must not be triggered)."""
    event._ok = True
    event._value = value
    env.schedule(event, delay=delay)

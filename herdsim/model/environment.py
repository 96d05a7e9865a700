"""A ``simpy.Environment`` whose run loop is one Python frame instead of a call per event.

``Environment.run(until)`` calls ``step()`` once per event; at millions of events the
method call is a visible share of a run. :meth:`Environment.run_until` inlines ``step``
and stops where ``run(until=at)`` would: at an ``URGENT`` stop event scheduled when it is
called, so every event ``run`` would process, this processes, in the same order. Anything
else (processes, ``timeout``, ``step``, ``run``) is SimPy's own: a user's SimPy process
runs in it unchanged.
"""

from __future__ import annotations

from heapq import heappop

import simpy
from simpy.core import URGENT, BoundClass
from simpy.events import Event


class Environment(simpy.Environment):
    """SimPy's environment plus an inlined :meth:`run_until`."""

    def __init__(self, initial_time: float = 0):
        super().__init__(initial_time)
        # SimPy binds ``timeout``, ``process`` … to the instance only for the names in the
        # instance's own class; bind the inherited ones too, or each access builds a method.
        for name, obj in vars(simpy.Environment).items():
            if type(obj) is BoundClass:
                setattr(self, name, getattr(self, name))

    def run_until(self, at: float) -> None:
        """Process every event before *at* (as ``run(until=at)`` does), then stop."""
        if at <= self._now:
            raise ValueError(f"until ({at}) must be greater than the current simulation time")
        stop = Event(self)
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

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
* :class:`Lean` holds all the run loop reads of an event (``callbacks``, ``_ok``,
  ``_value``), the last also under the public name ``value``; :class:`Timer` is the hot
  path's event, made with no Python frame and scheduled with one ``heappush`` of the entry
  ``Environment.schedule`` would push (same clock, priority and event id, so the same
  order). A ``simpy.Process`` can wait on one, as on any SimPy event.
* :class:`Alarm` is a timer reused for every firing of one callback (the arrivals).
* :class:`Runner` starts and interrupts one of the engine's own generators as
  ``simpy.Process`` does; the generator resumes itself (its ``send`` is the callback of
  the event it waits for), so a resume costs no Python frame besides its own.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any

import simpy
from simpy import Interrupt
from simpy.core import NORMAL, URGENT, BoundClass


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
                stop.callbacks = None  # type: ignore[assignment]  # processed, as SimPy marks it
                return
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                # A failed event nobody handled crashes the run, as in ``step``.
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc


# the slot's descriptor, under its public name
Environment.now = Environment.__dict__["_now"]  # type: ignore[method-assign,assignment]


def trigger_later(env: simpy.Environment, event, value, delay: float = 0.0) -> None:
    """Make *event* succeed with *value* at ``now + delay`` (it must not be triggered);
    with no delay this is ``event.succeed(value)``."""
    event._ok = True
    event._value = value
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), event))


class Lean:
    """What the run loop (and ``simpy.Process``) reads of an event, and nothing else:
    ``callbacks``, ``_ok`` and ``_value``, which reads as ``value`` too (the same slot).
    Subclasses add their own slots (``Timer``, and ``calls.Call``: a call served at once
    is its own event)."""

    __slots__ = ("callbacks", "_ok", "_value")
    callbacks: Any  # a list, a deque (a line of waiters), or None once processed
    _ok: bool
    _value: Any
    value: Any


Lean.value = Lean.__dict__["_value"]  # the slot's descriptor, under its public name


class Timer(Lean):
    """A scheduled event for the engine's own use; ``call`` carries the downstream call a
    timer belongs to, if any. Made by :func:`at`, :func:`later` or :func:`unfired`.
    """

    __slots__ = ("call",)
    call: Any


def unfired() -> Timer:
    """A :class:`Timer` not scheduled yet: waiters join its callbacks, and
    :func:`trigger_later` fires it."""
    timer = Timer()
    timer.callbacks = []
    timer._ok = True
    timer._value = None
    return timer


def at(env: simpy.Environment, when: float, value=None, priority: int = NORMAL) -> Timer:
    """A :class:`Timer` firing *value* at time *when* (no waiters yet), pushed on the heap
    as the entry ``Environment.schedule`` makes, so it keeps SimPy's order."""
    timer = unfired()
    timer._value = value
    heappush(env._queue, (when, priority, next(env._eid), timer))  # type: ignore[misc]  # a Timer stands in for an Event
    return timer


def later(env: simpy.Environment, delay: float, value=None, priority: int = NORMAL) -> Timer:
    """A :class:`Timer` firing *value* at ``now + delay`` (``env.timeout``'s time)."""
    return at(env, env._now + delay, value, priority)


def call_later(env: simpy.Environment, delay: float, callback) -> None:
    """``later(env, delay).callbacks.append(callback)`` in one frame: *callback* is called
    at ``now + delay`` (with the timer). The hot path's sleeps and a call graph's tiers
    schedule through it."""
    timer = Timer()
    timer.callbacks = [callback]
    timer._ok = True
    timer._value = None
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), timer))  # type: ignore[misc]  # a Timer stands in for an Event


class Alarm(Timer):
    """One timer for one callback, set again and again (a run's arrivals): no timer is
    made per firing. Each :meth:`set` gives it fresh callbacks (the callback, which
    waiters may follow) and keeps its value, which the callback may set for the waiters
    (they read it after the callback has set the alarm again). Set it again only once
    it has fired."""

    __slots__ = ("env", "_callback")

    def __init__(self, env: simpy.Environment, callback):
        self.env = env
        self._callback = callback
        self._ok = True
        self._value = None

    def set(self, when: float) -> None:
        """Fire the callback (with this alarm) at time *when*."""
        self.callbacks = [self._callback]
        env = self.env
        heappush(env._queue, (when, NORMAL, next(env._eid), self))  # type: ignore[misc]  # an Alarm stands in for an Event


def urgent(env: simpy.Environment, value=None) -> Timer:
    """A :class:`Timer` firing *value* now, ahead of the events already due now (what an
    interrupt of ``Process`` or :class:`Runner` schedules)."""
    return at(env, env._now, value, URGENT)


class Runner:
    """A process for the engine's own generators, cheaper than ``simpy.Process``.

    Its generator resumes itself: before each ``yield`` it appends its own ``send``
    (``runner.send``) to the callbacks of the event it waits for, so the run loop calls
    straight into the generator with the fired event (no frame in between), and it reads
    the value off that event. Before the generator waits on something an interrupt may
    detach it from, it names it in ``runner.target``. :meth:`start` runs the generator
    up to its first bare ``yield`` (bindings only, no effects), then resumes it at an
    ``URGENT`` event now, as ``Process`` does; ``interrupt(cause)`` throws
    ``Interrupt(cause)`` in at ``URGENT`` priority, as ``Process.interrupt`` does.
    Nothing can wait for a runner to end (the engine's loops never end).
    """

    __slots__ = ("env", "send", "_throw", "target")
    target: Any  # the event an interrupt detaches the generator from

    def __init__(self, env: simpy.Environment):
        self.env = env

    def start(self, generator) -> None:
        """Run *generator* from now (after the events already due now, as ``Process``)."""
        self.send = generator.send
        self._throw = generator.throw
        next(generator)
        later(self.env, 0.0, None, URGENT).callbacks.append(self.send)

    def interrupt(self, cause) -> None:
        """Throw ``Interrupt(cause)`` into the generator, ahead of the events due now."""
        later(self.env, 0.0, cause, URGENT).callbacks.append(self._interrupted)

    def _interrupted(self, event) -> None:
        self.target.callbacks.remove(self.send)
        self._throw(Interrupt(event._value))

"""A cache in front of a tier: requests with keys, answered by the cache or the tier.

:func:`front` takes over a downstream's ``call`` and ``finish`` (as a call graph's
:class:`~herdsim.model.downstream.tiers.Tier` part does), only on a tier whose section has
a ``cache``: a tier without one keeps its own. Each request draws its key from the
cache's own stream. A **hit** (a fresh entry, or with ``stale`` a stale one) is answered
after the hit latency without touching the tier. A **miss** becomes a :class:`Flight`,
the tier's caller: its call may queue, be refused, time out or fail at t0 like any
other, and a success fills the cache. The requests waiting on a flight hear its outcome;
with ``coalesce`` a miss on a key already being fetched joins that flight instead of
calling (single-flight), and a stale hit sends one refresh flight per key. A ``flush``
outage on the tier empties the store when it begins and bypasses it (no lookups, no
fills; coalescing goes on) while it holds.

A request's retries ask for the key its first call asked for: a caller holds its key
from a miss until it hears a success (an open-loop job draws a new one at its first
call). A queue worker is one caller for all its jobs: a job it gives up leaves its key to
the worker's next call, and with ``retry_mode: requeue`` a retry may be taken by another
worker and ask a new key.

Every request is counted in ``cache_hits`` or ``cache_misses`` (the coalesced misses
also in ``cache_coalesced``, the stale hits in ``cache_stale``); the tier's own counters
see only the flights' calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from herdsim.model.calls import OK, SERVING, TIMEOUT, make_call
from herdsim.model.kernel import later, trigger_later, unfired
from herdsim.model.streams import draws
from herdsim.policies.cache import HIT, MISS, Cache

COUNTERS = ("cache_hits", "cache_misses", "cache_coalesced", "cache_stale")  # its columns


class Flight:
    """One call to the tier for *key*: the caller the tier sees. *waiters* are the
    requests' calls it answers (none for a refresh)."""

    __slots__ = ("front", "key", "waiters", "call")

    def __init__(self, front: Front, key: int):
        self.front = front
        self.key = key
        self.waiters: list[Any] = []
        self.call: Any = None  # its call to the tier, once sent

    def heard(self, event) -> None:
        """The tier answered."""
        self.front.heard(self, event.value)

    def interrupt(self, cause) -> None:
        """The tier failed its calls together (t0): so do the waiters. The call's event
        may still fire later (its deadline): the flight no longer hears it (the tier, or
        a fleet that already let the call go, would settle it a second time)."""
        c, self.call = self.call, None
        if c is not None and c.event is not None and c.event.callbacks:
            c.event.callbacks.remove(self.heard)
        self.front.landed(self)
        for waiter in self.waiters:
            waiter.proc.interrupt(cause)


class Front:
    """The cache of one tier *ds* (see the module docstring)."""

    def __init__(self, ds, cfg: Cache, keys_rng: np.random.Generator,
                 latency_rng: np.random.Generator, counters):
        self.ds = ds
        self.env = ds.env
        self.health = ds.health
        self.store = cfg.store()
        self.coalesce = cfg.coalesce
        self._key = draws(cfg.keys.sampler(keys_rng))
        latency = cfg.latency()
        self._latency = draws(latency.sampler(latency_rng)) if latency is not None else None
        self._call, self._finish = ds.call, ds.finish
        self.flights: dict[int, Flight] = {}  # the keys being fetched, coalesced or refreshed
        self._held: dict[Any, int] = {}  # a caller's key, from its miss until it succeeds
        self._flushes = 0
        hits, misses, coalesced, stale = COUNTERS
        self._hit = counters.counter(hits).append
        self._miss = counters.counter(misses).append
        self._coalesced = counters.counter(coalesced).append if cfg.coalesce else None
        self._stale = counters.counter(stale).append \
            if getattr(cfg.eviction, "stale", 0.0) else None
        ds.call = self.call
        ds.finish = self.finish

    def _sync(self) -> bool:
        """Empty the store if a flush began since the last look; True while one holds."""
        health = self.health
        if health.flushes != self._flushes:
            self._flushes = health.flushes
            self.store.flush()
        return health.flushing > 0

    def call(self, proc, timeout: float | None):
        """A request from *proc*: a hit's call, a waiter on a flight, or the tier's fast
        failure (an ``int``)."""
        env = self.env
        now = env.now
        held = self._held.pop(proc, None)
        # a job's first call asks a new key (its draws are whole numbers)
        key: int = self._key() if held is None or getattr(proc, "attempts", 0) == 1 \
            else held  # type: ignore[assignment]
        bypass = self._sync()
        answer = MISS if bypass else self.store.lookup(key, now)
        if answer != MISS:
            self._hit(now)
            c = make_call(proc, 0, None)
            c.state = SERVING
            delay = self._latency() if self._latency is not None else 0.0
            if timeout is not None and delay >= timeout:
                c.event = later(env, timeout, TIMEOUT)
            else:
                c.event = later(env, delay, OK)
            if answer != HIT:  # stale: served, and one refresh goes out
                self._stale(now)  # type: ignore[misc]
                if key not in self.flights:
                    self._fly(Flight(self, key), timeout, register=True)
            return c
        self._miss(now)
        self._held[proc] = key  # until it succeeds: a retry asks for the same key
        if self.coalesce:
            flight = self.flights.get(key)
            if flight is not None:
                self._coalesced(now)  # type: ignore[misc]
                return self._wait(flight, proc)
        flight = Flight(self, key)
        refused = self._fly(flight, timeout, register=self.coalesce)
        if refused is not None:
            return refused
        return self._wait(flight, proc)

    def _wait(self, flight: Flight, proc):
        c = make_call(proc, 0, None)
        c.state = SERVING
        c.event = unfired()
        flight.waiters.append(c)
        return c

    def _fly(self, flight: Flight, timeout: float | None, register: bool) -> int | None:
        """Send *flight*'s call to the tier: its fast failure, or None (in flight)."""
        c = self._call(flight, timeout)
        if c.__class__ is int:
            return c
        if register:
            self.flights[flight.key] = flight
        flight.call = c
        c.event.callbacks.append(flight.heard)
        return None

    def heard(self, flight: Flight, value: int) -> None:
        """*flight*'s call ended with *value*: settled by the tier, filled on success."""
        c, flight.call = flight.call, None
        outcome = self._finish(c, value)
        self.landed(flight)
        if outcome == OK and not self._sync():
            self.store.fill(flight.key, self.env.now)
        env = self.env
        for waiter in flight.waiters:
            trigger_later(env, waiter.event, outcome)

    def landed(self, flight: Flight) -> None:
        """*flight* is over: a later miss on its key calls again."""
        if self.flights.get(flight.key) is flight:
            del self.flights[flight.key]

    def finish(self, c, value: int) -> int:
        """A request's outcome: what its event carries (a hit's OK, a flight's outcome)."""
        if value == OK:
            self._held.pop(c.proc, None)
        return value


def front(ds, cfg: Cache, keys_rng: np.random.Generator, latency_rng: np.random.Generator,
          counters) -> Front:
    """Put *cfg*'s cache in front of downstream *ds*, counting into *counters* (a
    recorder or a tier's record: ``counter(name)``)."""
    return Front(ds, cfg, keys_rng, latency_rng, counters)

"""The call graph at run time: tiers (downstreams that call other tiers) and their edges.

Each tier is the downstream its section asks for (the core, or the core with its
defences: :func:`~herdsim.model.downstream.defences.downstream_type`) with a
:class:`Tier` part attached: it counts how every call that reached it ended (succeeded,
or failed: refused at once, an error, a timeout, failed at t0); a service tier arms
each call's client deadline on its own timer (its callers' edges may send different
timeouts); a caller's ``cancel`` stops a call it serves with calls. A tier with
``calls`` serves a call with :class:`~herdsim.model.downstream.calling.Calling` instead
of the ``at_start`` part, through its :mod:`~herdsim.model.downstream.edges`. Every call
carries its caller's timeout (the edge's; the workers' own at the top tier).
"""

from __future__ import annotations

from array import array
from functools import partial
from typing import Any

import numpy as np

from herdsim.config import graph
from herdsim.config.scenario import Scenario
from herdsim.model import cache
from herdsim.model.calls import OK, RUNNING, WAITING
from herdsim.model.downstream import fleet
from herdsim.model.downstream.calling import Calling
from herdsim.model.downstream.core import Downstream
from herdsim.model.downstream.defences import downstream_type
from herdsim.model.downstream.edges import Edge
from herdsim.model.kernel import at
from herdsim.model.streams import server_draws

GRAPH_STREAMS = 1000  # SeedSequence spawn key of the graph's streams (clear of PURPOSES)
TIER_PURPOSES = ("service", "outages", "network", "request", "admission", "cache_keys",
                 "cache_latency")


class TierRecord:
    """What one tier counts: the time of every call that reached it (``attempts``) and of
    every outcome (``succeeded``, ``failed``), its refusals, timeouts, errors, wasted
    work and crashes. The workers' downstream shares the run's recorder for the core's
    counters."""

    def __init__(self, name: str, capacity: float, recorder=None):
        self.name = name
        self.capacity = capacity
        for counter in ("attempts", "rejected", "timeouts", "errors", "wasted", "crashes"):
            setattr(self, counter, getattr(recorder, counter) if recorder is not None
                    else array("d"))
        self.succeeded = array("d")
        self.failed = array("d")
        # a defended tier's own counters and gauges (kept, not written)
        self.optional: dict[str, array] = {}
        self.gauges: dict[str, list[float]] = {}
        self.samplers: list = []  # (samples, read) of a service's own gauges (its factor)
        self.fleet: fleet.Fleet | None = None  # its replicas (a section with replicas)

    def counter(self, name: str) -> array:
        return self.optional.setdefault(name, array("d"))


class Tier:
    """The part that makes a downstream *ds* a tier counting into *record* (see the
    module docstring): it takes over the downstream's ``call``, ``finish``, ``expire``
    (and the deadline handler that is it) and, with *own_deadlines*, ``arm_deadline``,
    and gives it ``cancel``, each wrapping the downstream's own."""

    def __init__(self, ds: Downstream, record: TierRecord, own_deadlines: bool):
        self.ds = ds
        self.env = ds.env
        self._heard_ok, self._failed = record.succeeded.append, record.failed.append
        self._call, self._finish, self._expire = ds.call, ds.finish, ds.expire
        self._on_deadline = self._deadline
        ds.call = self.call  # type: ignore[method-assign]  # (the core sets it per instance too)
        ds.finish = self.finish  # type: ignore[method-assign]
        if ds.on_deadline == ds.expire:  # (no wire: the deadline is the core's expire)
            ds.on_deadline = self.expire
        ds.expire = self.expire  # type: ignore[method-assign]
        ds.cancel = self.cancel  # type: ignore[attr-defined]
        ds.on_fail_in_flight = self._failed_in_flight
        if own_deadlines:
            ds.arm_deadline = self._arm_own  # type: ignore[method-assign]

    def call(self, proc, timeout: float | None) -> Any:
        c = self._call(proc, timeout)
        if c.__class__ is int:
            self._failed(self.env.now)
        return c

    def finish(self, c, value: int) -> int:
        outcome = self._finish(c, value)
        (self._heard_ok if outcome == OK else self._failed)(self.env.now)
        return outcome

    def _failed_in_flight(self, n: int) -> None:
        now, failed = self.env.now, self._failed
        for _ in range(n):
            failed(now)

    def _arm_own(self, c) -> None:
        """``arm_deadline`` of a service tier whose callers' timeouts differ: a timer per
        deadline."""
        timer = at(self.env, c.deadline)
        timer.call = c
        timer.callbacks.append(self._on_deadline)

    def expire(self, c) -> None:
        """The client deadline of *c* has come (see the core); when its caller's edge
        cancels, a call this tier is serving with calls of its own stops here."""
        running = c.state == RUNNING
        self._expire(c)
        ds = self.ds
        if running and getattr(c.proc, "cancels", False) and c.epoch == ds.epoch:
            serving = getattr(ds.service, "servings", {}).pop(c, None)
            if serving is not None:
                serving.cancel()

    def cancel(self, c) -> None:
        """*c*'s caller gave up on it (its own call was cancelled): a waiting call is
        dropped and a call served with calls stops, both answered ``TIMEOUT`` as their
        deadline would; a call in a leaf's service runs to its end."""
        if c.state == WAITING or c.state == RUNNING:
            self.ds.expire(c)

    def _deadline(self, timer) -> None:
        c = timer.call
        if c.event is not None:  # still awaited
            self.ds.on_deadline(c)


def fleets(env, records: dict[str, TierRecord], width: float, n_bins: int) -> dict:
    """The graph's tiers with replicas, by name; a service's fleet gauges, and a plain
    service's own (a degrading one's factor), sampled at every bin start into its record
    (the top tier's are the run's, sampled with them)."""
    found = {name: r.fleet for name, r in records.items() if r.fleet is not None}
    below = [f for name, f in found.items() if name != next(iter(records))]
    if below:
        env.process(fleet.sample(env, below, width, n_bins))
    own = [pair for r in list(records.values())[1:] for pair in r.samplers]
    if own:
        env.process(_sample(env, own, width, n_bins))
    return found


def _sample(env, samplers: list, width: float, n_bins: int):
    """A process: each ``(samples, read)`` pair's reading at every bin start."""
    for k in range(n_bins):
        yield env.timeout(k * width - env.now)
        for samples, read in samplers:
            samples.append(read())


def _uniform_deadlines(name: str, every: dict, deadline: str | None) -> bool:
    """Whether every call to tier *name* gets the same timeout (one edge timeout, none
    propagated): its deadlines then fall due in the order they are armed, and the core's
    one timer for the oldest serves them all."""
    incoming = [e for cfg in every.values() for e in cfg.calls if e.service == name]
    return (len({e.timeout for e in incoming}) <= 1
            and not any((e.deadline or deadline) == "propagate" for e in incoming))


def build(env, scenario: Scenario, recorder, top_args: dict, service_draws,
          top_cache: tuple[np.random.Generator, ...] = ()):
    """Every tier of *scenario*'s graph: ``(the workers' downstream, records by name,
    edges by caller)``. *top_args* are the workers' downstream's draws as a single-tier
    run makes them (its streams are the run's own); ``service_draws(section, rng)`` makes
    a service-time section's draws; *top_cache* the top tier's cache streams (keys, hit
latency: the run's own), used only when it has a cache."""
    every = graph.tiers(scenario.downstream, scenario.services)
    root = np.random.SeedSequence(scenario.seed, spawn_key=(GRAPH_STREAMS,))
    seeds = root.spawn(2 * len(every))
    built: dict = {}
    records: dict[str, TierRecord] = {}
    for i, (name, cfg) in enumerate(every.items()):
        record = TierRecord(name, cfg.capacity_rate(), recorder if i == 0 else None)
        caching = top_cache
        if i == 0:
            args = dict(top_args)
        else:
            rngs = {p: np.random.default_rng(s) for p, s in
                    zip(TIER_PURPOSES, seeds[2 * i].spawn(len(TIER_PURPOSES)), strict=True)}
            args = server_draws(cfg, rngs, service_draws)
            caching = (rngs["cache_keys"], rngs["cache_latency"])
        own = i > 0 and not _uniform_deadlines(name, every, scenario.deadline)
        classed = i == 0 and scenario.workload.criticality is not None  # the workers' tier
        if cfg.replicas is not None:  # replicas behind a balancer, each a counted pool
            tier: Any = fleet.build(env, cfg, record, scenario.seed, i, service_draws,
                                    partial(Tier, record=record, own_deadlines=own),
                                    classed=classed)
            record.fleet = tier
        else:
            tier = downstream_type(cfg, classed)(env, cfg, recorder=record, **args)
            Tier(tier, record, own_deadlines=own)
            if i > 0:  # (the top tier's are the run's own gauges)
                record.samplers = list(getattr(tier, "degradation_samplers", ()))
        if cfg.cache is not None:  # in front of the Tier part: a hit never reaches the tier
            keys_rng, latency_rng = caching
            cache.front(tier, cfg.cache, keys_rng, latency_rng,
                        recorder if i == 0 else record)
        built[name] = tier
        records[name] = record
    edges: dict = {}
    for i, (name, cfg) in enumerate(every.items()):
        if not cfg.calls:
            continue
        tier = built[name]
        mine = [Edge(e, built[e.service], s, scenario.deadline) for e, s in
                zip(cfg.calls, seeds[2 * i + 1].spawn(len(cfg.calls)), strict=True)]
        edges[name] = mine
        for pool in getattr(tier, "replicas", (tier,)):
            pool.service = Calling(pool, records[name], pool.service._draw,
                                   cfg.overload.latency_per_call, pool.service._network, mine)
            pool._start = pool.service.start
    return built[graph.top_name(scenario.downstream)], records, edges

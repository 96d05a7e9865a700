"""A tier with ``replicas``: N pools behind a balancer (docs/model.md, Fleets).

Each replica is the downstream its section asks for (the core, or the core with its
defences), with its own slots, waiting room, defences, health and outages (an outage
with ``replica: i`` hits replica *i* alone; one without, every replica), and its own
random streams (``SeedSequence(seed, spawn_key=(FLEET_STREAMS, tier, replica))``), so
adding a replica shifts no other's draws. The :class:`Fleet` speaks the core's call
protocol: ``call(proc, timeout)`` picks a replica by the balancer member's rule
(:mod:`herdsim.policies.balancers`) among the healthy ones (all of them in panic) and
hands the call over; ``finish(call, value)`` goes back to that replica. Outlier
detection hears every answer; active health checks and the detector's sweeps run on
their own timers. Nothing here runs for a tier without replicas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from herdsim.model.calls import DOWN, ERROR, FAILED, OK, REJECTED, TIMEOUT
from herdsim.model.downstream.core import Downstream
from herdsim.model.downstream.defences import downstream_type
from herdsim.model.streams import server_draws, uniform
from herdsim.policies.balancers import MAX_REPLICAS, in_panic
from herdsim.policies.balancers.outlier import probe_passes
from herdsim.policies.balancers.simple import RoundRobin

FLEET_STREAMS = 2000  # SeedSequence spawn key of the fleets' streams (clear of the graph's)
REPLICA_PURPOSES = ("service", "outages", "network", "request", "admission")
BALANCER, PROBES = MAX_REPLICAS, MAX_REPLICAS + 1  # the fleet's own streams, after replicas
# counters only some fleets have (an arm without them: 0), by their names' ends
COUNTERS = ("_ejections", "no_healthy_host", "pending_overflow")
FIVE_XX = frozenset((DOWN, REJECTED, ERROR, TIMEOUT, FAILED))  # what outlier detection counts


class FleetHealth:
    """What the gauges read of a fleet's health: up while any replica is up; and what a
    cache in front reads: a flush outage (every replica has it: it takes no replica)."""

    def __init__(self, replicas: list[Downstream]):
        self._replicas = replicas

    @property
    def up(self) -> bool:
        return any(r.health.up for r in self._replicas)

    @property
    def flushes(self) -> int:
        return self._replicas[0].health.flushes

    @property
    def flushing(self) -> int:
        return self._replicas[0].health.flushing


class Fleet:
    """N replicas behind a balancer, answering the call protocol (see the module
    docstring). ``active[i]``: calls in flight at replica *i* as the shared view sees
    them; a client-scoped balancer keeps one such list per caller."""

    def __init__(self, env, cfg, replicas: list[Downstream], recorder,
                 draw: Callable[[], float], probe_draw: Callable[[], float],
                 jobs_of: dict | None = None):
        self.env = env
        self.replicas = replicas
        n = self.n = len(replicas)
        member = self.member = cfg.balancer or RoundRobin()
        self._picker = member.picker
        self._draw = draw
        self.active = [0] * n
        # a hash balancer keeps no state of its own per caller: one view serves them all
        shared = member.scope == "proxy" or member.keyed
        self._proxy = member.picker(n, draw) if shared else None
        self._keyed = member.keyed
        self._views: dict[Any, tuple[Any, list[int]]] = {}  # a client-scoped view by caller
        self._callers: dict[Any, int] = {}  # each caller's number: its hash key (keyed)
        self._jobs_of = jobs_of  # a queue worker's job, by its process (workload.keys)
        self._where: dict[Any, tuple[int, list[int]]] = {}  # a call's replica and view
        self._tried: dict[Any, set[int]] | None = {} if member.previous_hosts else None
        self._threshold = member.panic_threshold
        self._max_pending = member.max_pending_requests  # Envoy's pending queue (None: none)
        if self._max_pending is not None:
            self._overflow = recorder.counter("pending_overflow").append
        self._last = 0
        self.eligible = list(range(n))
        self.ejector = (cfg.outlier_detection.ejector(n)
                        if cfg.outlier_detection is not None else None)
        self.checker = cfg.health_check.checker(n) if cfg.health_check is not None else None
        self._probe_draw = probe_draw
        self.calls = [recorder.counter(f"replica{i}_calls") for i in range(n)]
        self._calls = [times.append for times in self.calls]
        self.ejections = ([recorder.counter(f"replica{i}_ejections") for i in range(n)]
                          if self.ejector is not None else [])
        self._ejected = [times.append for times in self.ejections]
        self.failures = [0] * n  # calls each replica answered with anything but OK
        if self.ejector is not None or self.checker is not None:  # all may be out
            self._no_host = recorder.counter("no_healthy_host").append
        self._attempts, self._rejected = recorder.attempts.append, recorder.rejected.append
        self.health = FleetHealth(replicas)
        self.gauge_samplers: list = []
        for i, r in enumerate(replicas):
            self.gauge_samplers.append((recorder.gauges.setdefault(f"replica{i}_in_flight", []),
                                        lambda r=r: float(r.busy + r.n_waiting)))
            if self.ejector is not None or self.checker is not None:
                self.gauge_samplers.append((recorder.gauges.setdefault(f"replica{i}_healthy", []),
                                            lambda i=i: float(self._healthy(i))))
            previous = r.on_fail_in_flight
            r.on_fail_in_flight = self._failing(i, previous)
        self.gauge_samplers += _shared_gauges(replicas)
        if self.ejector is not None:
            env.process(self._sweeps(cfg.outlier_detection.interval))
        if self.checker is not None:
            env.process(self._probes(cfg.health_check.interval))

    # -- what the callers and the gauges read ---------------------------------------------

    @property
    def busy(self) -> int:
        return sum(r.busy for r in self.replicas)

    @property
    def n_waiting(self) -> int:
        return sum(r.n_waiting for r in self.replicas)

    @property
    def retry_after(self) -> float | None:
        """The Retry-After of the replica that answered last."""
        return self.replicas[self._last].retry_after

    # -- the call protocol ----------------------------------------------------------------

    def call(self, proc, timeout: float | None) -> Any:
        """Pick a replica for *proc*'s call and hand it over (the core's ``call``)."""
        key = self.key_of(proc) if self._keyed else 0
        if self._proxy is not None:
            picker, view = self._proxy, self.active
        else:
            found = self._views.get(proc)
            if found is None:
                found = self._views[proc] = (self._picker(self.n, self._draw), [0] * self.n)
            picker, view = found
        hosts = self.eligible
        if not hosts:  # every host ejected, no panic: Envoy's 503 "no healthy upstream"
            now = self.env.now
            self._no_host(now)
            self._attempts(now)
            self._rejected(now)
            return REJECTED
        host = picker.pick(hosts, view, key)
        tried = self._tried
        if tried is not None:
            seen = tried.setdefault(proc, set())
            if host in seen:  # one more pick (host_selection_retry_max_attempts: 1)
                host = picker.again(hosts, view, key)
            seen.add(host)
        now = self.env.now
        replica = self.replicas[host]
        if self._max_pending is not None and replica.busy >= replica.concurrency \
                and self.n_waiting >= self._max_pending:  # no slot, the pending queue full
            self._overflow(now)
            self._attempts(now)
            self._rejected(now)
            return REJECTED
        self._calls[host](now)
        self._last = host
        c = replica.call(proc, timeout)
        if c.__class__ is int:
            self._heard(host, proc, c, now)
            return c
        self._where[c] = (host, view)
        view[host] += 1
        if view is not self.active:
            self.active[host] += 1
        return c

    def key_of(self, proc) -> int:
        """*proc*'s call's hash key: its request's key (a cache's flight, a job with a
        key), as ``-1 - key``; else the caller's number, in order of first call."""
        key = getattr(proc, "key", None)
        if key is None and self._jobs_of is not None:
            key = getattr(self._jobs_of.get(proc), "key", None)
        if key is not None:
            return -1 - key
        number = self._callers.get(proc)
        if number is None:
            number = self._callers[proc] = len(self._callers)
        return number

    def finish(self, c, value: int) -> int:
        """The outcome of *c* from the replica that served it (the core's ``finish``)."""
        host, view = self._where.pop(c)
        view[host] -= 1
        if view is not self.active:
            self.active[host] -= 1
        outcome = self.replicas[host].finish(c, value)
        self._last = host
        self._heard(host, c.proc, outcome, self.env.now)
        return outcome

    def cancel(self, c) -> None:
        """*c*'s caller gave up on it: its replica's ``cancel`` (a tier's)."""
        found = self._where.get(c)
        if found is not None:
            self.replicas[found[0]].cancel(c)  # type: ignore[attr-defined]

    def expire(self, c) -> None:
        found = self._where.get(c)
        if found is not None:
            self.replicas[found[0]].expire(c)

    # -- health -----------------------------------------------------------------------------

    def _heard(self, host: int, proc, outcome: int, now: float) -> None:
        if outcome != OK:
            self.failures[host] += 1
        elif self._tried is not None:
            self._tried.pop(proc, None)
        ejector = self.ejector
        if ejector is not None and ejector.heard(host, outcome in FIVE_XX, now):
            self._ejected[host](now)
            self._refresh()

    def _failing(self, host: int, previous: Callable[[int], None] | None):
        """Replica *host*'s hook for calls failing together: they leave the views."""
        replica = self.replicas[host]

        def failing(n: int) -> None:
            now = self.env.now
            for c in list(replica.active):
                found = self._where.pop(c, None)
                if found is not None:
                    found[1][host] -= 1
                    if found[1] is not self.active:
                        self.active[host] -= 1
                    self._heard(host, c.proc, FAILED, now)
            if previous is not None:
                previous(n)

        return failing

    def state(self, host: int) -> str:
        """Replica *host*'s state now: ``ejected`` (by outlier detection), ``unhealthy``
        (failing its health checks), ``down`` (an outage or crash has it down) or ``up``."""
        if self.ejector is not None and self.ejector.ejected[host]:
            return "ejected"
        if self.checker is not None and self.checker.failing[host]:
            return "unhealthy"
        return "up" if self.replicas[host].health.up else "down"

    def _healthy(self, host: int) -> bool:
        return not ((self.ejector is not None and self.ejector.ejected[host])
                    or (self.checker is not None and self.checker.failing[host]))

    def _refresh(self) -> None:
        """The eligible hosts: the healthy ones, or every one in panic (Envoy)."""
        healthy = [i for i in range(self.n) if self._healthy(i)]
        self.eligible = (list(range(self.n)) if in_panic(len(healthy), self.n, self._threshold)
                         else healthy)

    def _sweeps(self, interval: float):
        env, ejector = self.env, self.ejector
        while True:
            yield env.timeout(interval)
            for host in ejector.tick(env.now):  # type: ignore[union-attr]
                if ejector.ejected[host]:  # type: ignore[union-attr]
                    self._ejected[host](env.now)
            self._refresh()

    def _probes(self, interval: float):
        env, checker, draw = self.env, self.checker, self._probe_draw
        while True:
            yield env.timeout(interval)
            changed = False
            for i, r in enumerate(self.replicas):
                h = r.health
                changed |= checker.probed(  # type: ignore[union-attr]
                    i, probe_passes(h.up, h.blackhole, h.error_rate, draw))
            if changed:
                self._refresh()


def sample(env, fleets: list[Fleet], width: float, n_bins: int):
    """A process: the gauges of *fleets* (a graph's services) at every bin start."""
    samplers = [pair for f in fleets for pair in f.gauge_samplers]
    for k in range(n_bins):
        yield env.timeout(k * width - env.now)
        for samples, read in samplers:
            samples.append(read())


def _shared_gauges(replicas: list[Downstream]) -> list:
    """A defended or degrading replica's gauges (its admission limit, its degradation
    factor …) are the run's columns: one sample a bin, the replicas' mean."""
    readers: dict[int, tuple[list, list]] = {}
    for r in replicas:
        for samples, read in (*getattr(r, "gauge_samplers", ()),
                              *getattr(r, "degradation_samplers", ())):
            readers.setdefault(id(samples), (samples, []))[1].append(read)
    return [(samples, lambda reads=reads: sum(f() for f in reads) / len(reads))
            for samples, reads in readers.values()]


def build(env, cfg, recorder, seed: int, tier: int, service_draws,
          wrap: Callable[[Downstream], Any] | None = None,
          jobs_of: dict | None = None, classed: bool = False) -> Fleet:
    """The fleet *cfg* (a downstream or service section with ``replicas``) asks for, tier
    number *tier* of the run seeded *seed*; ``service_draws(section, rng)`` makes a
    service-time section's draws, *wrap* is applied to each replica (a tier's counting);
    *jobs_of*: the job each queue worker holds (its key: a keyed workload's); *classed*:
    the replicas defend by criticality class."""
    replicas = []
    for i in range(cfg.replicas):
        own = [o for o in cfg.outages if o.replica is None or o.replica == i]
        rcfg = cfg.model_copy(update={"outages": own})
        root = np.random.SeedSequence(seed, spawn_key=(FLEET_STREAMS, tier, i))
        rngs = {p: np.random.default_rng(s) for p, s in
                zip(REPLICA_PURPOSES, root.spawn(len(REPLICA_PURPOSES)), strict=True)}
        args = server_draws(cfg, rngs, service_draws)
        replica = downstream_type(rcfg, classed)(env, rcfg, recorder=recorder, **args)
        if wrap is not None:
            wrap(replica)
        replicas.append(replica)
    own_rng = [np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(FLEET_STREAMS,
                                                                              tier, k)))
               for k in (BALANCER, PROBES)]
    return Fleet(env, cfg, replicas, recorder, uniform(own_rng[0]), uniform(own_rng[1]),
                 jobs_of)

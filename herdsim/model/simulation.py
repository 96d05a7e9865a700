"""Wiring: a validated scenario in, a :class:`Finished` run (the raw record) out."""

from __future__ import annotations

import gc
import math
import time
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, overload

import numpy as np

from herdsim.config.graph import has_graph, top_name
from herdsim.config.scenario import Scenario
from herdsim.model import cache, classes, hedging, job_streams
from herdsim.model.downstream import fleet, tiers
from herdsim.model.downstream.core import Downstream
from herdsim.model.downstream.defences import downstream_type
from herdsim.model.downstream.edges import Edge
from herdsim.model.downstream.family import Progress
from herdsim.model.finished import Finished
from herdsim.model.gates import BreakerGate, BreakerStats
from herdsim.model.hand import hand
from herdsim.model.kernel import Environment, Runner
from herdsim.model.late import LateAnswers
from herdsim.model.queues import DelayedQueue, JobQueue, KeyedDelayedQueue, KeyedQueue
from herdsim.model.recorder import MERGED, Recorder
from herdsim.model.scaling import Pool, autoscaler
from herdsim.model.streams import Draws, draws, generators, server_draws, uniform
from herdsim.model.worker import (
    Frozen,
    make_finish,
    make_give_up,
    make_keyed,
    make_plain_caller,
    make_plain_worker,
    make_retry,
    make_run_job,
    plain,
    worker,
)
from herdsim.model.workload import Job, OpenArrivals, clock, key_draws, make_job
from herdsim.policies.adaptive import ClientRateLimiter
from herdsim.policies.attempt import RetryRules
from herdsim.policies.distributions.base import Distribution


def _service_draws(cfg: Distribution, rng: np.random.Generator) -> Draws:
    """Times drawn one at a time by the distribution's own sampler."""
    return draws(cfg.sampler(rng))


def overhead_draws(cfg: float | Distribution, rng: np.random.Generator) -> Draws | None:
    """``workers.attempt_overhead`` per attempt: None without one, a duration as it is,
    a distribution's draws from the ``overhead`` stream."""
    if isinstance(cfg, float | int):
        return (lambda: cfg) if cfg else None
    return _service_draws(cfg, rng)


PROGRESS_STEPS = 200  # progress calls per run, evenly spaced in simulated time
# Allocations between the cyclic collector's young sweeps during a run (Python's default
# is 700). A run allocates millions of short-lived events and heap entries that reference
# counting frees; at the default the full sweeps (each a walk over every live object) cost
# about a sixth of a 10,000-worker run. Cycles (finished open-loop callers) are still
# collected, 100,000 allocations apart.
GC_THRESHOLD = 100_000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Raise the collector's first threshold to ``GC_THRESHOLD`` for the block."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


class Simulation:
    """One run of one scenario: the SimPy environment and everything living in it.

    *progress*, if given, is called ``PROGRESS_STEPS`` times at evenly spaced simulated
    times, the last with ``now == duration`` when the run ends. Its timers touch no model
    state, so a run reports the same numbers with it or without it.
    """

    def __init__(self, scenario: Scenario, progress: Progress | None = None):
        self.scenario = scenario
        self.progress = progress
        self.env = env = Environment()
        rngs = generators(scenario.seed)
        self._poison_draw = uniform(rngs["poison"])
        per_job = job_streams.streams_for(scenario.seed)  # the testbed's comparison only
        self.retry_rules = RetryRules.of(
            scenario.retry, per_job.generator() if per_job else rngs["strategy"])
        # whether workers and callers run the plain loop (per job: run_job, which notes the
        # job each worker holds, job_streams.serve_per_job)
        self.fast = plain(scenario) and per_job is None
        self.recorder = Recorder()
        self.clock = clock(scenario.workload, lambda n: rngs["arrivals"].exponential(1.0, n),
                           rngs["offsets"])
        self.keyed = scenario.workload.keys is not None
        self.open_loop = scenario.workers.count is None
        feeds = None if self.open_loop else self.clock  # the queue's arrivals (open: none)
        poll = scenario.workers.poll_interval
        if scenario.workload.criticality is not None:  # each job draws its class
            self.new_job = classes.classed_new_job(  # type: ignore[method-assign]
                self, rngs["criticality"], self.new_job)
        self._unkeyed_new_job = self.new_job
        if self.keyed:  # client-go's workqueue: jobs collapse into their keys
            self._key_draw = key_draws(scenario.workload, rngs["keys"])
            self._record_key = self.recorder.job_keys = array("q")
            self.new_job = self._new_keyed_job  # type: ignore[method-assign]  # every job gets a key
            self.queue: JobQueue = KeyedQueue(env, feeds, self.new_job, self._merge)
            self.delayed: DelayedQueue = KeyedDelayedQueue(env, self.queue, poll, self._merge)
        else:
            self.queue = JobQueue(env, feeds, self.new_job, self.plain_job,
                                  newest_first=self.fast)
            self.delayed = DelayedQueue(env, self.queue, poll)
        self.in_hand: set[Job] = hand(env, scenario)  # (notes jobs: keys, classes)
        self.sleeping = 0
        self.tiers: dict[str, tiers.TierRecord] = {}  # a call graph's tiers, by name
        self.fleets: dict[str, fleet.Fleet] = {}  # the tiers with replicas, by name
        self.edges: dict[str, list[Edge]] = {}  # and the edges each one calls
        self.downstream = self._downstream(rngs)
        if scenario.workload.criticality is not None:  # waiting rooms by class
            classes.file_by_class(self)
        self._arrivals = self.recorder.arrivals.append
        self._poison = self.recorder.poison_ids.append
        self._poison_fraction = scenario.workload.poison_fraction
        self._queue_limit = scenario.workload.queue_limit
        self._base = scenario.retry.base
        self._job_class = Job  # an open-loop plain caller's job is its own caller
        self.n_bins = max(1, math.ceil(scenario.duration / scenario.bin - 1e-9))
        self._budget_draw = uniform(rngs["budget"])
        self._breaker_draw = uniform(rngs["breaker"])
        self._budgets: dict = {}
        self._limiters: dict = {}
        self.breaker_stats = BreakerStats()
        self.gates: list[BreakerGate] = []
        self._pool_gate = self._new_gate() if scenario.breaker.scope == "pool" else None
        n_clients = scenario.workers.clients
        self.clients = (draws(lambda n: rngs["clients"].integers(0, n_clients, n))
                        if n_clients else None)
        self.client_gates = ([self._new_gate() for _ in range(n_clients)]
                             if n_clients and scenario.breaker.enabled
                             and scenario.breaker.scope == "client" else None)
        self.finish = make_finish(self)  # the worker loops' shared steps
        self.give_up = make_give_up(self, self.finish)
        self.retry = make_retry(self, self.give_up)
        if per_job is not None:
            self.retry = job_streams.per_job(self.retry, per_job)
        if self.keyed:
            self.finish, self.give_up, self.retry = make_keyed(self)
        self.hedged = hedging.for_workers(self) if scenario.hedging is not None else None
        self.overhead = overhead_draws(scenario.workers.attempt_overhead, rngs["overhead"])
        self.run_job = make_run_job(self, LateAnswers(self) if scenario.retry.late_answers
                                    else None)
        if per_job is not None:  # the testbed's comparison: service times per job too
            job_streams.serve_per_job(self)
        self.pool: Pool | None = None  # the workers under an autoscaler
        self._start(progress)

    def _downstream(self, rngs) -> Downstream:
        """The downstream the scenario describes (with its defences when it has any; the
        top tier of its call graph when it has one), each of its draws from a stream of its
        own."""
        scenario = self.scenario
        cfg = scenario.downstream
        classed = scenario.workload.criticality is not None  # defences by class
        args = server_draws(cfg, rngs, _service_draws)
        caching = (rngs["cache_keys"], rngs["cache_latency"])  # (drawn only with a cache)
        if has_graph(cfg, scenario.services, scenario.hedging):
            downstream, self.tiers, self.edges = tiers.build(self.env, scenario, self.recorder,
                                                             args, _service_draws, caching)
            self.fleets = tiers.fleets(self.env, self.tiers, scenario.bin, max(1, math.ceil(
                scenario.duration / scenario.bin - 1e-9)))
            return downstream
        if cfg.replicas is not None:  # replicas behind a balancer: each its own streams
            built: Any = fleet.build(self.env, cfg, self.recorder, scenario.seed, 0, _service_draws,
                                jobs_of=getattr(self.in_hand, "jobs", None), classed=classed)
            self.fleets = {top_name(cfg): built}
            if cfg.cache is not None:  # one cache in front of them all
                cache.front(built, cfg.cache, *caching, self.recorder)
            return built
        downstream = downstream_type(cfg, classed)(self.env, cfg, recorder=self.recorder, **args)
        if cfg.cache is not None:
            cache.front(downstream, cfg.cache, *caching, self.recorder)
        return downstream

    def _start(self, progress: Progress | None) -> None:
        """At t = 0: the backlog, the arrivals, the gauges and progress timers, then the
        workers (the loop chosen once, from what is configured), in that order."""
        env, scenario = self.env, self.scenario
        fast = self.fast
        # an open-loop caller: started now (the backlog), or by its arrival, after it
        start = arrive = self._start_caller
        if self.open_loop and fast:
            self._job_class = caller = make_plain_caller(self)
            start, arrive = caller.start, caller.attempt
        deliver = start if self.open_loop else self.queue.put
        for _ in range(scenario.workload.backlog):  # at t = 0, before the first arrival
            job = self.new_job(0.0)
            if job is not None:
                deliver(job)
        if self.open_loop:
            OpenArrivals(env, self.clock, self.new_job, arrive)
        env.process(self._sample_gauges())
        if progress is not None:
            self._arm_progress(1)
        if fast and not self.open_loop:
            plain_worker = make_plain_worker(self)
            for _ in range(scenario.workers.count):  # type: ignore[arg-type]  # plain: queue workers
                runner = Runner(env)
                runner.start(plain_worker(runner))
            return
        if scenario.workers.autoscale is not None:
            self.pool = Pool(self, self._start_worker)
            self.recorder.gauges["workers"] = []
            self.pool.grow(scenario.workers.count)  # type: ignore[arg-type]  # autoscale: queue workers
            env.process(autoscaler(self, self.pool))
            return
        for _ in range(scenario.workers.count or 0):
            self._start_worker()

    def _start_worker(self) -> None:
        gate = self._pool_gate if self.scenario.breaker.scope == "pool" else self._new_gate()
        self.env.process(worker(self, gate, self.pool.leaves if self.pool else None))

    def _new_gate(self) -> BreakerGate | None:
        if not self.scenario.breaker.enabled:
            return None
        cfg = self.scenario.breaker
        gate = BreakerGate(self.env, cfg.build(), self.breaker_stats,
                           cfg.resume_jitter, self._breaker_draw)
        self.gates.append(gate)
        return gate

    def budget_for(self, owner) -> object | None:
        """The retry budget of *owner* (a worker process or a client), the pool's, or None."""
        cfg = self.scenario.budget
        if cfg is None:
            return None
        key = owner if cfg.scope != "pool" else None
        budget = self._budgets.get(key)
        if budget is None:
            budget = self._budgets[key] = cfg.build(self._budget_draw)
        return budget

    def limiter_for(self, owner) -> ClientRateLimiter | None:
        """The client rate limiter of *owner* (a worker process or a client), the pool's,
        or None; made when first asked for, with the clock at that moment."""
        cfg = self.scenario.client_limiter
        if cfg is None:
            return None
        key = owner if cfg.scope != "pool" else None
        limiter = self._limiters.get(key)
        if limiter is None:
            limiter = self._limiters[key] = cfg.build(self.env.now)
        return limiter

    @overload
    def new_job(self, now: float) -> Job | None: ...
    @overload
    def new_job(self, now: float, lazy: bool) -> Job | int | None: ...

    def new_job(self, now: float, lazy: bool = False) -> Job | int | None:
        """A new job arrives at *now* (None when the main queue is full and refuses it).
        With *lazy* a plain job (not poison) comes as its id alone: the main queue keeps
        a waiting job as an id, and makes it (:meth:`plain_job`) when it hands it out."""
        if self._queue_limit is not None and len(self.queue) >= self._queue_limit:
            self.recorder.refused.append(now)
            return None
        job_id = len(self.recorder.arrivals)
        self._arrivals(now)
        if self._poison_fraction and self._poison_draw() < self._poison_fraction:
            self._poison(job_id)
            return make_job(job_id, True, self._base, self._job_class)
        return job_id if lazy else make_job(job_id, False, self._base, self._job_class)

    def plain_job(self, job_id: int) -> Job:
        """The plain job *job_id*, as :meth:`new_job` makes it when it arrives."""
        return make_job(job_id, False, self._base)

    def _new_keyed_job(self, now: float, lazy: bool = False) -> Job | None:
        """:meth:`new_job` with the job's key drawn (accepted jobs only, in id order);
        always a ``Job`` (the keyed queue never asks for an id)."""
        job = self._unkeyed_new_job(now)
        if job is not None:
            job.key = key = self._key_draw()
            self._record_key.append(key)
        return job

    def _merge(self, job: Job, now: float) -> None:
        """*job* collapses at *now* into the job of its key queued, held or waiting."""
        self.finish(job, now, MERGED)

    def _start_caller(self, job: Job) -> None:
        """Open loop: every job is its own caller process."""
        self.env.process(self.run_job(job, self._pool_gate))

    def _sample_gauges(self):
        env, ds, gauges = self.env, self.downstream, self.recorder.gauges
        width = self.scenario.bin
        in_flight, waiting = gauges["in_flight"].append, gauges["waiting"].append
        depth, delayed, up = (gauges["queue_depth"].append, gauges["delayed"].append,
                              gauges["downstream_up"].append)
        breaker_open = gauges["breaker_open"].append
        stats = self.breaker_stats
        extra = (*getattr(ds, "gauge_samplers", ()),  # a defended downstream's limit, mode
                 *getattr(ds, "degradation_samplers", ()))  # a degrading one's factor
        for k in range(self.n_bins):
            yield env.timeout(k * width - env.now)
            in_flight(ds.busy)
            waiting(ds.n_waiting)
            depth(len(self.queue) if self.open_loop else self.queue.depth(env.now))
            delayed(len(self.delayed) + self.sleeping)
            up(1.0 if ds.health.up else 0.0)
            breaker_open(stats.not_closed / max(1, len(self.gates)))  # (autoscale adds)
            for samples, read in extra:
                samples.append(read())
            if self.pool is not None:
                gauges["workers"].append(self.pool.alive)

    def _arm_progress(self, k: int) -> None:
        """A timer for the *k*-th progress call (the last one is made by :meth:`run`)."""
        if k < PROGRESS_STEPS:
            at = self.scenario.duration * k / PROGRESS_STEPS
            timer = self.env.timeout(at - self.env.now)
            timer.callbacks.append(lambda _timer: self._report_progress(k))

    def _report_progress(self, k: int) -> None:
        self.progress(self.env.now, self.scenario.duration)  # type: ignore[misc]  # armed only with a progress
        self._arm_progress(k + 1)

    def pending_jobs(self, fresh: bool = True) -> list[Job]:
        """Jobs still in the system: queued, parked for a retry, or held by a worker;
        without *fresh*, less those still queued as they arrived (never taken)."""
        # those arriving before the end (the run stops before it)
        queued = self.queue.jobs(None if self.open_loop else self.scenario.duration, fresh)
        return [*queued, *self.delayed.jobs(), *self.in_hand]

    def run(self) -> Finished:
        started = time.perf_counter()
        try:
            with _fewer_collections():
                self.env.run_until(self.scenario.duration)
        except Frozen as frozen:
            raise frozen.error() from None
        wall = time.perf_counter() - started
        if self.progress is not None:
            self.progress(self.scenario.duration, self.scenario.duration)
        gates = self.gates
        open_time = (self.breaker_stats.total_open(gates, self.scenario.duration) / len(gates)
                     if gates else 0.0)
        return Finished(self.scenario, self.recorder, self.n_bins, self.pending_jobs(False), wall,
                        sum(g.breaker.trips for g in gates), open_time, tiers=self.tiers,
                        fleets=self.fleets)


def run(scenario: Scenario, progress: Progress | None = None) -> Finished:
    """The queue model's engine (see :mod:`~herdsim.model.downstream.family`): one run of
    *scenario*, reporting *progress*."""
    return Simulation(scenario, progress).run()

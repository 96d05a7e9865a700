"""What a run, or many, will cost, read off the scenario before simulating it.

One estimate knows every multiplier of a run's work (see docs/architecture.md, "The cost
estimate"): the jobs that arrive; the calls each job makes at every tier of the call graph
(:mod:`herdsim.planning.calls`: fan-out ``count`` x retries or hedged copies, multiplied
along each path by one iterative walk); calls beyond a limit where retries are unlimited
and immediate; the workers at the autoscaler's maximum; the poller's and the bins' ticks.
:func:`plan` multiplies one run's estimate by replications, arms and sweep cells, in
time linear in the arms (never in the replications). :func:`check` refuses, before
anything starts, work whose bound exceeds the default budget (:func:`budget_text`):
:data:`CPU_BUDGET`, an hour of CPU at :data:`ASSUMED_SPEED`, for all the runs together,
and :data:`MEMORY_SHARE` of this machine's memory for the runs at once; ``force``
accepts it.

Two figures of each: the bound (``calls``, ``most_work``, ``most_bytes``: every call
takes all its retries, every hedged copy is sent; with unlimited retries it assumes 20 a
call and is no bound, ``unlimited`` says so), and the point estimate of CPU (``work``)
and peak memory (``bytes``) from the jobs, the calls a fan-out always makes,
the retries of requeue mode that fit in the run, the calls without end, the workers and
the ticks, with a small weight on the bound. Its coefficients were fitted on this
model's bundled scenarios and the stacks comparison's arms (``benchmarks/estimate.py``:
within 3x of what each measures, the table in docs/architecture.md).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario
from herdsim.errors import CapacityError
from herdsim.model.downstream import family
from herdsim.planning import cache, connections
from herdsim.planning.calls import UNBOUNDED_RETRIES, Tier, walk
from herdsim.planning.fleet import fleet_bytes, fleet_ticks
from herdsim.policies import downstreams
from herdsim.policies.arrivals.piecewise import Piecewise

# CPU, in calls of the calibration run (its CPU over its calls: a job and a call each);
# fitted on the bundled scenarios (benchmarks/estimate.py): the calls a run really makes
# depend on whether its storm ends, which a reading of the scenario cannot tell, so the
# bound of calls weighs little, the jobs, the callers and the calls without end much
WORK_PER_JOB = 0.7  # an arrival, queued, taken, called and finished
WORK_PER_OPEN_LOOP_JOB = 2.8  # open loop: each job is a SimPy process of its own
WORK_PER_SURE_CALL = 1.0  # a call beyond a job's first that a fan-out always makes
WORK_PER_BOUND_CALL = 0.02  # a call of the upper bound (most are never made)
WORK_PER_REQUEUED_RETRY = 0.8  # requeue mode: a retry that fits in the run (the pool is
# free while jobs wait, so a storm in requeue mode retries in full)
WORK_PER_ENDLESS_CALL = 1.5  # a call of a retry without limit or wait: all made (and
# each costs more than a calibration call: measured on stacks.yaml under tenacity)
WORK_PER_TICK = 0.05  # a poller's or autoscaler's tick, a bin
WORK_PER_WORKER = 50.0  # a worker's process: a large pool keeps a herd going
# peak memory, bytes: what the recorder's arrays, the frames and the live processes hold
BASE_BYTES = 10e6  # what the first run allocates whatever its size (the model's imports)
BYTES_PER_JOB = 70  # a job's arrays and its row in the jobs frame
BYTES_PER_CALL = 50  # a call (a job's first included): its arrays and frames' rows (47 B
# measured per call of tenacity's storm on stacks.yaml)
BYTES_PER_BIN = 600  # ~20 counter/gauge columns, as arrays and in the frame
BYTES_PER_WORKER = 1_000  # one SimPy process
CPU_BUDGET = 3600.0  # CPU seconds all the runs of one command may take unless forced
MEMORY_SHARE = 0.75  # of this machine's memory the runs at once may take unless forced
RECOVERY = 2.0  # disturbed seconds beyond an outage: the calls in flight, the backlog
CLASSED_WORK = 1.9  # a job's and its calls' CPU with criticality classes (the general
# loop, a class read per call): classes.yaml with and without them, best of 3, 1.8-1.9x
BYTES_PER_CLASSED_JOB = 2  # its class: a byte in the recorder, a code in the jobs frame
DEGRADED_WORK = 1.5  # a call's CPU at a degrading server (its factor read and moved per
# call): 1.26x on outage.yaml, 1.33-1.65x on gc.yaml with a cost of 0 (the same calls)
REFUSAL_COST_WORK = 1.1  # ... with refusals that take server time: 1.0-1.10x


ADVICE = {  # "jobs": how the scenario's members make fewer (:func:`fewer_jobs`)
    "jobs": "shorten duration or {jobs}",
    "calls": "lower retries, fan-out (calls.count) or hedged copies, or shorten duration",
    "bins": "widen bin or shorten duration",
    "workers": "lower workers.count (or workers.autoscale.max)",
    "caches": "lower cache.size (or cache.keys.count below alpha 1.1)",
    "replicas": "lower replicas, or share one balancer (scope: proxy)",
}


@dataclass(frozen=True)
class Estimate:
    """The work of one run of a scenario: ``calls`` at most (all tiers), ``likely`` calls,
    ``work`` (CPU in calibration calls) and ``bytes`` (peak memory) as estimated, and
    ``most_work``, ``most_bytes`` with every call of the bound made; ``parts`` is its
    memory by what costs it (``jobs``, ``calls``, ``bins``, ``workers``), so advice names
    the field that matters; ``tiers`` the calls per job at each tier."""

    jobs: float
    calls: float
    rows: float
    bytes: float
    events: float
    parts: tuple[tuple[str, float], ...] = ()
    unlimited: bool = False  # some retries are unlimited: calls assume 20 a call
    likely: float = 0.0
    work: float = 0.0
    most_work: float = 0.0
    most_bytes: float = 0.0
    tiers: tuple[Tier, ...] = ()
    fewer_jobs: str = "lower workload.rate"  # the members' knob

    @property
    def cpu(self) -> float:
        """CPU seconds at the speed measured on this machine (calibrating once)."""
        return self.work / calls_per_cpu_second()

    def advice(self) -> str:
        """What to change to make the run smaller: the fields of its largest part."""
        largest = max(self.parts, key=lambda part: part[1])[0] if self.parts else "jobs"
        return ADVICE[largest].format(jobs=self.fewer_jobs)

    def describe(self) -> str:
        fan = (f" ({', '.join(f'{t.name} {t.most:,.0f}' for t in self.tiers)} a job)"
               if len(self.tiers) > 1 else "")
        return (f"about {self.jobs:,.0f} jobs, up to {self.calls:,.0f} downstream calls"
                f"{fan}, {self.rows:,.0f} time-series rows and {self.events:,.0f} "
                f"simulated events, ~{_size(self.bytes)} of memory (up to "
                f"{_size(self.most_bytes)})")


def disturbed(scenario: Scenario) -> float:
    """The share of the run something is down or recovering: every outage, a crash's
    restart and :data:`RECOVERY` seconds each (at most 1)."""
    seconds = 0.0
    for tier in (scenario.downstream, *scenario.services.values()):
        collapse = tier.overload.collapse
        restart = collapse.restart_time if collapse is not None else 0.0
        for outage in tier.outages:
            seconds += outage.duration + restart + RECOVERY
    return min(1.0, seconds / scenario.duration)


def _jobs(scenario: Scenario) -> float:
    load = scenario.workload
    seconds = scenario.duration
    counted = load.source().jobs_within(seconds)
    if counted is not None:  # a source that counts its own (periodic clients)
        return load.backlog + counted
    if load.profile:
        arriving = Piecewise(load).integral(0.0, seconds)
    else:
        arriving = load.rate * seconds
        for spike in load.spikes:
            arriving += (spike.rate - load.rate) * min(spike.duration, seconds - spike.at)
    return load.backlog + max(arriving, 0.0)


def estimate(scenario: Scenario) -> Estimate:
    """The jobs, calls, time-series rows, CPU and memory one run of *scenario* may need,
    in time linear in its tiers and edges."""
    model = downstreams.named(scenario.downstream.model)
    fewer = model.knob or scenario.workload.source().knob
    if model is downstreams.Broker:  # its own clients
        return Estimate(**connections.estimate(scenario, disturbed(scenario), BASE_BYTES,
                                               BYTES_PER_JOB, BYTES_PER_CALL, BYTES_PER_BIN),
                        fewer_jobs=fewer)
    jobs = _jobs(scenario)
    tiers = walk(scenario, disturbed(scenario))
    endless = _endless(scenario, jobs)
    calls = jobs * sum(t.most for t in tiers) + endless
    likely = jobs * sum(t.likely for t in tiers) + endless
    rows = math.ceil(scenario.duration / scenario.bin)
    workers = scenario.workers.count or 0
    if scenario.workers.autoscale is not None:
        workers = max(workers, scenario.workers.autoscale.max)
    caches = [t.cache for t in (scenario.downstream, *scenario.services.values())
              if t.cache is not None]
    classed = scenario.workload.criticality is not None
    parts = (("jobs", jobs * (BYTES_PER_JOB + BYTES_PER_CALL
                              + (BYTES_PER_CLASSED_JOB if classed else 0))),
             ("calls", (likely - jobs) * BYTES_PER_CALL),
             ("bins", rows * BYTES_PER_BIN), ("workers", workers * BYTES_PER_WORKER),
             ("replicas", fleet_bytes(scenario, workers or jobs, rows)),
             *((("caches", sum(cache.memory(c) for c in caches)),) if caches else ()))
    most_bytes = BASE_BYTES + sum(b for _, b in parts) + (calls - likely) * BYTES_PER_CALL
    ticks = scenario.duration / scenario.workers.poll_interval  # the delayed queue's poller
    if scenario.workers.autoscale is not None:
        ticks += scenario.duration / scenario.workers.autoscale.interval
    ticks += fleet_ticks(scenario)
    events = calls * EVENTS_PER_CALL + ticks + rows
    per_job = WORK_PER_OPEN_LOOP_JOB if scenario.workers.count is None else WORK_PER_JOB
    sure = jobs * sum(t.likely for t in walk(scenario, 0.0))  # the fan-out: no retry
    tier_cfgs = (scenario.downstream, *scenario.services.values())
    per_call = ((CLASSED_WORK if classed else 1.0)  # what a job and each call cost
                * (DEGRADED_WORK if any(t.degradation for t in tier_cfgs) else 1.0)
                * (REFUSAL_COST_WORK if any(t.refusal_cost for t in tier_cfgs) else 1.0))
    fixed = jobs * per_job * per_call + (ticks + rows) * WORK_PER_TICK \
        + workers * WORK_PER_WORKER + sum(cache.priming(c) for c in caches)
    work = (fixed + per_call * (max(sure - jobs, 0.0) * WORK_PER_SURE_CALL
                                + jobs * _requeued_retries(scenario) * WORK_PER_REQUEUED_RETRY
                                + (calls - endless) * WORK_PER_BOUND_CALL
                                + endless * WORK_PER_ENDLESS_CALL))
    most_work = fixed + max(calls - jobs, 0.0) * WORK_PER_ENDLESS_CALL * per_call  # all made
    return Estimate(jobs, calls, rows, BASE_BYTES + sum(b for _, b in parts), events, parts,
                    any(t.unlimited for t in tiers), likely, work, most_work, most_bytes,
                    tuple(tiers), fewer)


EVENTS_PER_CALL = 4  # a call's events: its try, service, reply and the next sleep


def _requeued_retries(scenario: Scenario) -> int:
    """In requeue mode, the retries of a job whose sleeps fit in the run (one path of the
    strategy's sleeps, drawn with a fixed seed); 0 in sleep mode, open loop or hedged."""
    retry = scenario.retry
    if (scenario.workers.retry_mode != "requeue" or scenario.workers.count is None
            or scenario.hedging is not None or retry._untrusted):
        return 0
    limit = UNBOUNDED_RETRIES if retry.max_retries is None else retry.max_retries
    try:
        strategy = retry.build()
        rng, slept, prev = np.random.default_rng(0), 0.0, retry.base
        for attempt in range(1, limit + 1):
            prev = strategy.sleep(attempt, prev, rng)
            slept += prev
            if slept > scenario.duration:
                return attempt - 1
    except (ValueError, TypeError, ArithmeticError):  # a strategy that cannot say
        return limit
    return limit


def _endless(scenario: Scenario, jobs: float) -> float:
    """Calls beyond :data:`UNBOUNDED_RETRIES` when the workers retry without limit and at
    once (a zero-wait strategy, no ``max_retries``): every caller tries once per attempt's
    cost (``workers.attempt_overhead`` and the network's delays, at least a service time
    when they are 0) while the downstream is disturbed; with a crash rule, from the first
    outage to the end (the herd knocks it over again). Poison jobs that retry so, half
    the run each."""
    retry, load, ds = scenario.retry, scenario.workload, scenario.downstream
    if retry.max_retries is not None or scenario.hedging is not None:
        return 0.0
    try:
        zero_wait = getattr(retry.build(), "min_sleep", None) == 0.0
    except (ValueError, TypeError):  # a strategy read, not run: nothing to estimate
        return 0.0
    if not zero_wait:
        return 0.0
    overhead = scenario.workers.attempt_overhead
    per_try = getattr(overhead, "mean", overhead) + sum(
        delay.mean for delay in (ds.network_delay, ds.request_delay) if delay is not None)
    per_try = per_try or max(ds.service.mean, 1e-6)
    callers = scenario.workers.count or load.rate * per_try
    first = scenario.first_outage_start
    storm = 0.0
    if first is not None:
        storm = (scenario.duration - first if ds.overload.collapse is not None
                 else disturbed(scenario) * scenario.duration)
    poison = (jobs * load.poison_fraction * scenario.duration / 2
              if retry.poison_retryable else 0.0)
    return max(0.0, (callers * storm + poison) / per_try
               - jobs * UNBOUNDED_RETRIES * max(storm / scenario.duration,
                                                load.poison_fraction))


# outage.yaml at a tenth of its size, 20 s with a 1 s outage: a run that recovers, about
# 12,500 calls (one per job and a few retries), ~0.04 s of CPU on a 2020s laptop core; one
# twice as long measured the same speed (within 3%) at twice the cost
CALIBRATION = {
    "name": "calibration", "seed": 1, "duration": "20s", "bin": "100ms",
    "workload": {"rate": 600}, "workers": {"count": 300},
    "downstream": {"concurrency": 200, "queue_limit": 100,
                   "service": {"distribution": "exponential", "mean": "200ms"},
                   "timeout": "2s",
                   "outages": [{"start": "5s", "duration": "1s", "mode": "down"}]},
    "retry": {"strategy": "full_jitter", "base": "1s", "cap": "30s", "max_retries": 6},
}
ASSUMED_SPEED = 150_000.0  # calls per CPU second before measuring (decides whether to)
WORTH_SAYING = 5.0  # s: a run whose upper figure is shorter needs no time estimate


@functools.cache
def calls_per_cpu_second() -> float:
    """This machine's simulation speed: calls per CPU second of :data:`CALIBRATION`
    (measured once per process, in one run: a second, caches warm, took within 10% of
    the first)."""
    scenario = load_scenario(CALIBRATION)
    started = time.process_time()
    finished = family.simulate(scenario)
    took = time.process_time() - started
    return len(finished.recorder.attempts) / max(took, 1e-3)


@dataclass(frozen=True)
class Timing:
    """CPU seconds runs will take: ``likely`` the estimate, ``most`` with the upper bound
    of calls, at ``speed`` calls per CPU second, ``at_once`` runs in parallel."""

    likely: float
    most: float
    speed: float
    runs: int = 1
    at_once: int = 1
    assumed: bool = False  # a run retries without limit: its high end assumes 20 each
    longest: tuple[float, float] = (0.0, 0.0)  # the longest run's (likely, most) CPU

    def wall(self, cpu: float, longest: float = 0.0) -> float:
        """Wall seconds for *cpu* seconds of every run, ``at_once`` of them together, and
        no less than the *longest* run."""
        return max(cpu / max(1, min(self.at_once, self.runs)), longest)

    def describe(self) -> str:
        """``3.1 s (up to 20 s if every call takes all its retries): an estimate at
        202,171 calls per CPU second measured on this machine, on an idle machine; saving
        and drawing not included``."""
        low = duration_text(self.wall(self.likely, self.longest[0]))
        high = duration_text(self.wall(self.most, self.longest[1]))
        parallel = (f", {min(self.at_once, self.runs)} runs at a time"
                    if self.runs > 1 and self.at_once > 1 else "")
        why = ("" if high == low else
               f" (up to {high} if every call takes all its retries"
               + (f", {UNBOUNDED_RETRIES} where unlimited: more if they hammer "
                  "a dead downstream" if self.assumed else "") + ")")
        return (f"{low}{why}: an estimate at {self.speed:,.0f} calls per CPU second "
                f"measured on this machine, {_cores(self)}{parallel}; saving and drawing "
                "not included")


def _cores(t: Timing) -> str:
    return "on an idle machine" if t.at_once <= 1 else "one idle core per run"


def timing(guesses: list[Estimate], at_once: int = 1, measure: bool = True,
           replications: int = 1) -> Timing | None:
    """How long *replications* runs of each of *guesses* take (see the module doc), or
    None when even their upper figure at :data:`ASSUMED_SPEED` is under
    :data:`WORTH_SAYING` seconds. ``measure=False`` uses :data:`ASSUMED_SPEED` instead of
    calibrating."""
    likely = sum(g.work for g in guesses) * replications
    most = sum(g.most_work for g in guesses) * replications
    runs = len(guesses) * replications
    if most / ASSUMED_SPEED / max(1, min(at_once, runs)) < WORTH_SAYING:
        return None
    speed = calls_per_cpu_second() if measure else ASSUMED_SPEED
    longest = (max(g.work for g in guesses) / speed, max(g.most_work for g in guesses) / speed)
    return Timing(likely / speed, most / speed, speed, runs, at_once,
                  any(g.unlimited for g in guesses), longest)


@dataclass(frozen=True)
class Plan:
    """The work of many runs: ``runs`` of them, ``work`` and ``most_work`` in calibration
    calls together, ``bytes`` and ``most_bytes`` at once (the largest run, ``at_once``
    together), ``calls`` at most."""

    runs: int
    work: float
    most_work: float
    bytes: float
    most_bytes: float
    calls: float
    largest: Estimate

    @property
    def cpu(self) -> float:
        """CPU seconds of every run at the speed measured on this machine."""
        return self.work / calls_per_cpu_second()


def plan(guesses: Sequence[Estimate], replications: int = 1, at_once: int = 1) -> Plan:
    """*replications* runs of each of *guesses* (arms, sweep cells), *at_once* of them
    together (their memory: the *at_once* largest runs): in time linear in *guesses*,
    whatever *replications*."""
    if not guesses:
        raise ValueError("plan() of no runs")
    largest = max(guesses, key=lambda g: g.most_bytes)
    each = min(max(1, at_once), replications)  # runs of one arm that can be at once

    def together(size) -> float:
        sizes = sorted((size(g) for g in guesses), reverse=True)
        return sum(sizes[:math.ceil(max(1, at_once) / each)]) * each

    return Plan(len(guesses) * replications, sum(g.work for g in guesses) * replications,
                sum(g.most_work for g in guesses) * replications,
                together(lambda g: g.bytes), together(lambda g: g.most_bytes),
                sum(g.calls for g in guesses) * replications, largest)


def duration_text(seconds: float) -> str:
    """``40 s``, ``6 min``, ``2.5 h``: two significant digits, the unit a reader expects."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.2g} min"
    hours = seconds / 3600
    return f"{hours:.2g} h" if hours < 100 else f"{hours:,.0f} h"


def total_memory() -> float:
    """Bytes of memory this machine has (MemTotal on Linux; inf when unknown)."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def budget_text() -> str:
    """The default budget in words."""
    return (f"{duration_text(CPU_BUDGET)} of CPU at {ASSUMED_SPEED:,.0f} calls per CPU "
            f"second, {MEMORY_SHARE:.0%} of this machine's {_size(total_memory())} of memory")


def check(scenarios: Iterable[Scenario], at_once: int = 1, force: bool = False,
          replications: int = 1) -> None:
    """Raise :class:`CapacityError`, before anything runs, when *replications* runs of
    each of *scenarios* (*at_once* together) may exceed the default budget
    (:func:`budget_text`) with every call of the bound made: one line with the estimate
    and the flag that accepts it."""
    if force:
        return
    guesses = [estimate(s) for s in scenarios]
    if not guesses:
        return
    work = plan(guesses, replications, at_once)
    runs = (f"{work.runs:,} runs ({len(guesses):,} x {replications:,} replications) "
            if work.runs > 1 else "this run ")
    fewer = "fewer runs, or " if work.runs > 1 else ""
    most, likely = work.most_work / ASSUMED_SPEED, work.work / ASSUMED_SPEED
    if most > CPU_BUDGET:
        worst = max(guesses, key=lambda g: g.most_work)
        raise CapacityError(
            f"{runs}may take up to ~{duration_text(most)} of CPU (~{duration_text(likely)} "
            f"as estimated){'; the largest: ' if work.runs > 1 else ': '}{worst.describe()};"
            f" beyond the budget ({budget_text()}). To make it smaller: {fewer}"
            f"{worst.advice()}; or pass --force (force=True) to run it anyway")
    if work.most_bytes > MEMORY_SHARE * total_memory():
        largest = work.largest
        together = f" x {min(at_once, work.runs)} at once" if min(at_once, work.runs) > 1 else ""
        raise CapacityError(
            f"{runs}may need up to ~{_size(work.most_bytes)} of memory (~"
            f"{_size(work.bytes)} as estimated){'; the largest: ' if work.runs > 1 else ': '}"
            f"{largest.describe()}{together}; beyond the budget ({budget_text()}). To make "
            f"it smaller: {largest.advice()}; or pass --force (force=True) to run it anyway")


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:g}"


# the fluid model (herdsim predict, and boundary's first answer): its cost is its steps
FLUID_CPU_PER_STEP = 1e-6  # s: the compiled loop's own work a step (0.16-0.73 us a step on
# the bundled scenarios without a rate limit, benchmarks/predict_speed.py; 15 us in Python)
FLUID_CPU_PER_CELL = 2e-9  # s: a jittered sleep's kernel cell added, when every step fails
FLUID_BYTES_PER_STEP = 8 * 40  # the inputs, flows and their lists: ~40 floats a step
FLUID_BYTES_PER_CLASS_STEP = 8 * 2  # the retries' and client failures' tables, per class


@dataclass(frozen=True)
class FluidEstimate:
    """The fluid model's cost: ``steps``, the bound of its CPU (every step failing into
    every kernel) and its memory."""

    steps: int
    most_cpu: float
    bytes: float

    def describe(self) -> str:
        """``45,000 steps; up to ~2 s of CPU, ~60 MB``"""
        return (f"{self.steps:,} steps; up to ~{duration_text(self.most_cpu)} of CPU, "
                f"~{_size(self.bytes)}")


def fluid(steps: int, classes: int, kernel_cells: int) -> FluidEstimate:
    """The fluid model's cost on *steps* steps with *classes* call classes (retry number
    x poison) and *kernel_cells* cells in all its sleep kernels."""
    cpu = steps * (FLUID_CPU_PER_STEP + kernel_cells * FLUID_CPU_PER_CELL)
    return FluidEstimate(steps, cpu, BASE_BYTES + steps * (FLUID_BYTES_PER_STEP
                                                           + classes
                                                           * FLUID_BYTES_PER_CLASS_STEP))


def check_fluid(guess: FluidEstimate, force: bool = False) -> None:
    """Raise :class:`CapacityError` when the fluid model's bound exceeds the budget (the
    same one line as :func:`check`'s)."""
    if force:
        return
    if guess.most_cpu > CPU_BUDGET or guess.bytes > MEMORY_SHARE * total_memory():
        raise CapacityError(f"the fluid model may take {guess.describe()}; beyond the budget "
                            f"({budget_text()}). To make it smaller: shorten duration, "
                            "lower retry.max_retries or retry.cap; or pass --force "
                            "(force=True) to run it anyway")

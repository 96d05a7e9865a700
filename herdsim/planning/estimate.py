"""What a run will cost, read off the scenario before simulating it.

The recorder keeps a few flat arrays per job, per downstream call, per retry and per bin
(see :mod:`herdsim.model.recorder`); the frames built at the end copy them once more. The
coefficients below are bytes per item measured on this model's record, rounded up; the
estimate is an upper bound for the number of calls (every job taking all its retries) and
a rough figure for memory. :func:`check` refuses a run whose estimate exceeds the memory
this machine has available, unless forced.

Time is an estimate too (:func:`timing`): calls over this machine's speed, measured once
per process by simulating a small outage scenario (:data:`CALIBRATION`, about 12,500
calls) and counting its calls per CPU second. It assumes each job calls about once (a run
that recovers; retries beyond that cost in proportion) and an idle machine with one core
per run at once; saving and drawing come on top. The upper figure takes the upper bound
of calls. ``tests/planning/test_estimate.py`` checks that measured CPU time lies in the range
(within a factor of 2 either way).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario
from herdsim.errors import CapacityError
from herdsim.model.downstream import family
from herdsim.policies.arrivals.piecewise import Piecewise

BYTES_PER_JOB = 200  # arrival, outcome, finish arrays + the jobs frame + a queued Job
BYTES_PER_OPEN_LOOP_JOB = 2_000  # open loop: each job is a SimPy process
BYTES_PER_CALL = 40  # attempt times and the call's transient events
BYTES_PER_RETRY = 80  # four sleep arrays + the sleeps frame
BYTES_PER_BIN = 600  # ~20 counter/gauge columns, as arrays and in the frame
BYTES_PER_WORKER = 3_000  # one SimPy process
UNBOUNDED_RETRIES = 20  # calls per job assumed when max_retries is null
MAX_EVENTS = 5e9  # simulated events beyond which a run would take many hours
EVENTS_PER_CALL = 4  # a call's events: its try, service, reply and the next sleep


ADVICE = {
    "jobs": "shorten duration or lower workload.rate",
    "retries": "lower retry.max_retries, shorten duration or lower workload.rate",
    "bins": "widen bin or shorten duration",
    "workers": "lower workers.count",
}


@dataclass(frozen=True)
class Estimate:
    """Upper-bound work of one run of a scenario; ``parts`` is its memory by what costs it
    (``jobs``, ``retries``, ``bins``, ``workers``), so advice names the field that matters."""

    jobs: float
    calls: float
    rows: float
    bytes: float
    events: float
    parts: tuple[tuple[str, float], ...] = ()
    unlimited: bool = False  # max_retries is null: calls assume UNBOUNDED_RETRIES per job

    def advice(self) -> str:
        """What to change to make the run smaller: the fields of its largest memory part."""
        largest = max(self.parts, key=lambda part: part[1])[0] if self.parts else "jobs"
        return ADVICE[largest]

    def describe(self) -> str:
        return (f"about {self.jobs:,.0f} jobs, up to {self.calls:,.0f} downstream calls, "
                f"{self.rows:,.0f} time-series rows and {self.events:,.0f} simulated events, "
                f"~{_size(self.bytes)} of memory")


def estimate(scenario: Scenario) -> Estimate:
    """The jobs, calls, time-series rows and memory one run of *scenario* may need."""
    load = scenario.workload
    seconds = scenario.duration
    if load.profile:
        arriving = Piecewise(load).integral(0.0, seconds)
    else:
        arriving = load.rate * seconds
        for spike in load.spikes:
            arriving += (spike.rate - load.rate) * min(spike.duration, seconds - spike.at)
    jobs = load.backlog + max(arriving, 0.0)
    retries = scenario.retry.max_retries
    per_job = 1 + (UNBOUNDED_RETRIES if retries is None else retries)
    calls = jobs * per_job + _endless(scenario, jobs)
    rows = math.ceil(seconds / scenario.bin)
    per = BYTES_PER_OPEN_LOOP_JOB if scenario.workers.count is None else BYTES_PER_JOB
    parts = (("jobs", jobs * (per + BYTES_PER_CALL)),
             ("retries", (calls - jobs) * (BYTES_PER_CALL + BYTES_PER_RETRY)),
             ("bins", rows * BYTES_PER_BIN),
             ("workers", (scenario.workers.count or 0) * BYTES_PER_WORKER))
    ticks = seconds / scenario.workers.poll_interval  # the delayed queue's poller
    events = calls * EVENTS_PER_CALL + ticks + rows
    return Estimate(jobs, calls, rows, sum(b for _, b in parts), events, parts,
                    retries is None)


def _endless(scenario: Scenario, jobs: float) -> float:
    """Calls beyond :data:`UNBOUNDED_RETRIES` a job of poison makes when it retries at once
    and forever (a zero-wait strategy, no ``max_retries``): one per service time until the
    run ends (half the run on average), no more than the workers can make."""
    retry, load = scenario.retry, scenario.workload
    if retry.max_retries is not None or not retry.poison_retryable or not load.poison_fraction:
        return 0.0
    try:
        zero_wait = getattr(retry.build(), "min_sleep", None) == 0.0
    except (ValueError, TypeError):  # a strategy read, not run: nothing to estimate
        return 0.0
    if not zero_wait:
        return 0.0
    per_call = max(scenario.downstream.service.mean, 1e-6)
    poison = jobs * load.poison_fraction * scenario.duration / (2 * per_call)
    workers = (scenario.workers.count or math.inf) * scenario.duration / per_call
    return max(0.0, min(poison, workers) - jobs * load.poison_fraction * UNBOUNDED_RETRIES)


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
    """CPU seconds runs will take: ``likely`` with one call per job, ``most`` with the
    upper bound of calls, at ``speed`` calls per CPU second, ``at_once`` runs in parallel."""

    likely: float
    most: float
    speed: float
    runs: int = 1
    at_once: int = 1
    assumed: bool = False  # a run retries without limit: its high end assumes 20 each

    def wall(self, cpu: float) -> float:
        """Wall seconds for *cpu* seconds of every run, ``at_once`` of them together."""
        return cpu / max(1, min(self.at_once, self.runs))

    def describe(self) -> str:
        """``3.1–20 s (3.1 s if each job calls about once, 20 s if every job takes all its
        retries): an estimate at 202,171 calls per CPU second measured on this machine, on
        an idle machine; saving and drawing not included``."""
        low, high = duration_text(self.wall(self.likely)), duration_text(self.wall(self.most))
        parallel = (f", {min(self.at_once, self.runs)} runs at a time"
                    if self.runs > 1 and self.at_once > 1 else "")
        same_unit = low.split()[-1] == high.split()[-1]
        what = (low if high == low else
                f"{low.split()[0]}–{high}" if same_unit else f"{low} to {high}")
        why = ("" if high == low else
               f" ({low} if each job calls about once, {high} if every job takes all its "
               "retries" + (f", {UNBOUNDED_RETRIES} where unlimited: more if they hammer "
                            "a dead downstream" if self.assumed else "") + ")")
        return (f"{what}{why}: an estimate at {self.speed:,.0f} calls per CPU second "
                f"measured on this machine, {_cores(self)}{parallel}; saving and drawing "
                "not included")


def _cores(t: Timing) -> str:
    return "on an idle machine" if t.at_once <= 1 else "one idle core per run"


def timing(guesses: list[Estimate], at_once: int = 1, measure: bool = True
           ) -> Timing | None:
    """How long the runs of *guesses* take (see the module doc), or None when even their
    upper figure at :data:`ASSUMED_SPEED` is under :data:`WORTH_SAYING` seconds.
    ``measure=False`` uses :data:`ASSUMED_SPEED` instead of calibrating."""
    likely = sum(g.jobs for g in guesses)
    most = sum(g.calls for g in guesses)
    runs = len(guesses)
    if most / ASSUMED_SPEED / max(1, min(at_once, runs)) < WORTH_SAYING:
        return None
    speed = calls_per_cpu_second() if measure else ASSUMED_SPEED
    return Timing(likely / speed, most / speed, speed, runs, at_once,
                  any(g.unlimited for g in guesses))


def duration_text(seconds: float) -> str:
    """``40 s``, ``6 min``, ``2.5 h``: two significant digits, the unit a reader expects."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def available_memory() -> float:
    """Bytes of memory available to new work on this machine (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def check(scenarios: Iterable[Scenario], at_once: int = 1, force: bool = False) -> None:
    """Raise :class:`CapacityError` when the largest of *scenarios*, *at_once* of them
    running together, needs more memory than this machine has available, or more than
    :data:`MAX_EVENTS` simulated events (hours of work)."""
    if force:
        return
    guesses = [estimate(s) for s in scenarios]
    if not guesses:
        return
    longest = max(guesses, key=lambda e: e.events)
    if longest.events > MAX_EVENTS:
        raise CapacityError(
            f"this run needs {longest.describe()}: many hours of simulation. Shorten "
            "duration, lower workload.rate or lengthen workers.poll_interval; or pass "
            "--force (force=True) to run it anyway")
    largest = max(guesses, key=lambda e: e.bytes)
    free = available_memory()
    if largest.bytes * max(1, at_once) > free:
        together = f" x {at_once} at once" if at_once > 1 else ""
        raise CapacityError(
            f"this run needs {largest.describe()}{together}; this machine has "
            f"{_size(free)} available. To make it smaller: {largest.advice()}; "
            "or pass --force (force=True) to run it anyway")


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:g}"

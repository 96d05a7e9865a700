"""Retry jitter and service times drawn per job: the testbed comparison's mode (issue 40).

A run's strategy draws every sleep from one stream (``strategy``), in the order the
retries happen; the testbed's real workers cannot share that order (two processes, the
event loops' own interleaving). In this mode the sleep before retry *n* of job *j* is
drawn from a stream of its own, ``SeedSequence([seed, TAG, j, n])``, on both sides:
the simulation (:func:`active` around it) and the real workers
(:mod:`herdsim.testbed.workers`) give the same job the same jitter at the same retry,
whichever worker holds it and whenever it runs, so a divergence measures the model, not
the random numbers. ``herdsim run`` never enters the mode: its streams and its bytes are
as they were.

Service times likewise (:func:`service_time`): attempt *a* of job *j* is served for a time
drawn from ``SeedSequence([seed, SERVICE_TAG, j, a])``, by the simulated downstream
(:func:`serve_per_job`: chosen when the run is built, the plain path untouched) and by
the emulated one (the real worker names the job and attempt in its call's ``X-Job``
header), whatever order the services start in on either side.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, cast

import numpy as np

TAG = 40  # apart from SeedSequence(seed)'s own children (the run's streams)
SERVICE_TAG = 41  # the service times' streams, apart from the jitter's
_ACTIVE: ContextVar[bool] = ContextVar("herdsim_job_streams", default=False)


class JobStreams:
    """A generator the retry step draws from, positioned on a job's retry
    (:meth:`at`) before each draw: its methods are the positioned stream's."""

    def __init__(self, seed: int):
        self.seed = seed
        self.current = np.random.default_rng([seed, TAG])

    def at(self, job_id: int, retry: int) -> None:
        """Draw the next numbers from job *job_id*'s stream for its retry *retry*."""
        self.current = np.random.default_rng([self.seed, TAG, int(job_id), int(retry)])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current, name)

    def generator(self) -> np.random.Generator:
        """Itself, as the generator a retry step takes (it draws as one)."""
        return cast(np.random.Generator, self)


def per_job(retry, streams: JobStreams):
    """*retry* (a retry step drawing from *streams*) drawing each job's sleep from its
    own stream."""

    def retry_per_job(job, now, outcome, budget):
        streams.at(job.id, job.retries)
        return retry(job, now, outcome, budget)

    return retry_per_job


def service_time(seed: int, service, job_id: int, attempt: int) -> float:
    """The service time of attempt *attempt* (1: the first try) of job *job_id*, drawn by
    *service* (a distribution: its ``sampler``) from that attempt's own stream."""
    rng = np.random.default_rng([seed, SERVICE_TAG, int(job_id), int(attempt)])
    return float(service.sampler(rng)(1)[0])


class ServiceStreams:
    """The downstream's service draw in this mode: ``draw()`` is the service time of the
    attempt it was positioned on (:meth:`at`)."""

    def __init__(self, seed: int, service):
        self.seed, self.service = seed, service
        self.key = (0, 0)

    def at(self, job_id: int, attempt: int) -> None:
        """The next draw is attempt *attempt* of job *job_id*'s."""
        self.key = (job_id, attempt)

    def __call__(self) -> float:
        return service_time(self.seed, self.service, *self.key)


def serve_per_job(sim) -> None:
    """Draw *sim*'s (a built :class:`~herdsim.model.simulation.Simulation`, before its
    workers start) service times per job and attempt: its ``run_job`` notes the job each
    worker holds, and the downstream positions its service draw on the job of the call it
    starts. Needs workers that run ``run_job`` (not the plain loop) and one downstream."""
    streams = ServiceStreams(sim.scenario.seed, sim.scenario.downstream.service)
    downstream = sim.downstream
    downstream.service._draw = streams
    start, run_job, env = downstream._start, sim.run_job, sim.env
    holding: dict[Any, Any] = {}  # a worker's process -> the job it holds

    def start_keyed(c, now: float) -> None:
        job = holding[c.proc]
        streams.at(job.id, job.attempts)
        start(c, now)

    def run_job_noted(job, gate):
        holding[env.active_process] = job
        return (yield from run_job(job, gate))

    downstream._start = start_keyed
    sim.run_job = run_job_noted


@contextlib.contextmanager
def active() -> Iterator[None]:
    """Simulations started inside draw their retry jitter and service times per job."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def streams_for(seed: int) -> JobStreams | None:
    """The per-job streams of a run started now (None outside :func:`active`)."""
    return JobStreams(seed) if _ACTIVE.get() else None

"""Retry jitter drawn per job: the mode of the testbed's comparison (issue 40).

A run's strategy draws every sleep from one stream (``strategy``), in the order the
retries happen; the testbed's real workers cannot share that order (two processes, the
event loops' own interleaving). In this mode the sleep before retry *n* of job *j* is
drawn from a stream of its own, ``SeedSequence([seed, TAG, j, n])``, on both sides:
the simulation (:func:`active` around it) and the real workers
(:mod:`herdsim.testbed.workers`) give the same job the same jitter at the same retry,
whichever worker holds it and whenever it runs, so a divergence measures the model, not
the random numbers. ``herdsim run`` never enters the mode: its streams and its bytes are
as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, cast

import numpy as np

TAG = 40  # apart from SeedSequence(seed)'s own children (the run's streams)
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


@contextlib.contextmanager
def active() -> Iterator[None]:
    """Simulations started inside draw their retry jitter per job."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def streams_for(seed: int) -> JobStreams | None:
    """The per-job streams of a run started now (None outside :func:`active`)."""
    return JobStreams(seed) if _ACTIVE.get() else None

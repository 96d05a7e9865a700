"""Optimistic-concurrency contention (``downstream.model: occ``): N clients, one row.

The model of the AWS Architecture Blog post "Exponential Backoff And Jitter" (2015) and of
the simulator it used. The row has a version. Every one of ``workers.count`` clients
starts at t = 0 and updates the row once:

1. it sends a read; the read reaches the row one hop later and sees the version *v*;
2. the answer takes a hop back, the write (carrying *v*) a hop to the row: it succeeds
   only if the version is still *v* (then it becomes *v* + 1). Every write the row
   receives is a *call* (``attempts``); a failed one is a conflict (``rejected``);
3. the answer takes a hop back. On success the client is done (``success``). On a
   conflict it draws a backoff from ``retry`` (``retry.max_retries`` reached: it gives
   up, dead-lettered) and its next read reaches the row one hop plus the backoff later.

Every hop takes |Normal(``occ.hop_mean``, ``occ.hop_sd``)|, drawn independently. The
strategy sees attempt *n* + ``occ.first_attempt`` at retry *n* (0 = the first retry):
the 2015 simulator counts from 1, so its first backoff is already min(cap, 2·base).
Completion time is when the last client hears its success. The workload, the queue
downstream's fields, outages, breaker and budget play no part in this model.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np

from herdsim.config.scenario import Scenario
from herdsim.model.downstream.family import Progress
from herdsim.model.finished import Finished
from herdsim.model.recorder import DEAD_LETTERED, SUCCEEDED, Recorder
from herdsim.model.streams import draws, generators
from herdsim.model.workload import Job, make_job
from herdsim.policies.downstreams import Occ

_READ, _WRITE = 0, 1  # a read or a write reaching the row


@dataclass
class Contention:
    """What one run of the model produced beyond the recorder's lists."""

    clients: int
    resumed: list[float]  # when each retry's read reached the row
    pending: list[Job]  # clients not done when the run stopped

    def completion_time(self, recorder: Recorder) -> float | None:
        """When the last client heard its success; None unless every client succeeded."""
        outcomes = recorder.finish_outcome
        if self.pending or len(outcomes) < self.clients or DEAD_LETTERED in outcomes:
            return None
        return max(recorder.finish_time)


def contend(scenario: Scenario, recorder: Recorder) -> Contention:
    """Run the contention of *scenario* until every client is done or ``duration`` ends,
    appending what happens to *recorder* (times in seconds)."""
    cfg = Occ.fields(scenario.downstream.occ)
    retry = scenario.retry
    rngs = generators(scenario.seed)
    network = rngs["network"]
    hop = draws(lambda n: np.abs(network.normal(cfg.hop_mean, cfg.hop_sd, n)))
    strategy = retry.build()
    draw, stateful, rng = strategy.sleep, strategy.stateful, rngs["strategy"]
    first, max_retries, until = cfg.first_attempt, retry.max_retries, scenario.duration
    clients = scenario.workers.count or 0
    jobs = [make_job(i, False, retry.base) for i in range(clients)]
    recorder.arrivals.extend([0.0] * clients)
    calls, conflicts, resumed = recorder.attempts.append, recorder.rejected.append, []
    done: set[int] = set()

    def finish(job: Job, at: float, outcome: int) -> None:
        recorder.finish_id.append(job.id)
        recorder.finish_time.append(at)
        recorder.finish_attempts.append(job.attempts)
        recorder.finish_outcome.append(outcome)
        done.add(job.id)

    heap = [(hop(), i, _READ, i, 0) for i in range(clients)]
    heapq.heapify(heap)
    seq, version = clients, 0
    while heap:
        t, _, kind, i, seen = heapq.heappop(heap)
        if t > until:
            break
        seq += 1
        if kind == _READ:  # the answer goes back, the client writes at once
            heapq.heappush(heap, (t + hop() + hop(), seq, _WRITE, i, version))
            continue
        job = jobs[i]
        job.attempts += 1
        calls(t)
        won = seen == version
        if won:
            version += 1
        else:
            conflicts(t)
        heard = t + hop()
        if heard > until:
            continue  # the answer is still on its way when the run stops
        if won:
            finish(job, heard, SUCCEEDED)
            continue
        n = job.retries
        if max_retries is not None and n >= max_retries:
            finish(job, heard, DEAD_LETTERED)
            continue
        if stateful:
            pause, job.prev = draw(n + first, job.prev, rng)  # type: ignore[misc]  # a stateful strategy draws a pair
        else:
            pause = job.prev = draw(n + first, job.prev, rng)
        job.retries = n + 1
        recorder.record_sleep(heard, job.id, n, pause)
        back = heard + hop() + pause
        resumed.append(back)
        heapq.heappush(heap, (back, seq, _READ, i, 0))
    return Contention(clients, resumed, [job for job in jobs if job.id not in done])


def _sample_gauges(recorder: Recorder, contention: Contention, scenario: Scenario,
                   n_bins: int) -> None:
    """Gauges at every bin start: ``delayed`` = clients between hearing a conflict and
    their next read reaching the row, ``in_flight`` = the other clients not yet done."""
    at = np.arange(n_bins) * scenario.bin

    def count(times) -> np.ndarray:
        return np.searchsorted(np.sort(np.asarray(times, dtype=float)), at, side="right")

    delayed = count(recorder.sleep_time) - count(contention.resumed)
    in_flight = contention.clients - count(recorder.finish_time) - delayed
    zeros = np.zeros(n_bins)
    gauges = {"in_flight": in_flight, "waiting": zeros, "queue_depth": zeros,
              "delayed": delayed, "downstream_up": zeros + 1.0, "breaker_open": zeros}
    for name, values in gauges.items():
        recorder.gauges[name] = list(values.astype(float))


def run(scenario: Scenario, progress: Progress | None = None) -> Finished:
    """The ``occ`` model's engine (see :mod:`~herdsim.model.downstream.family`): one run
    of *scenario*; its summary adds ``completion_time`` and ``conflicts`` and has no
    capacity (there is no service rate). It runs its own event loop: *progress* hears
    only its end."""
    started = time.perf_counter()
    recorder = Recorder()
    contention = contend(scenario, recorder)
    wall = time.perf_counter() - started
    n_bins = max(1, math.ceil(scenario.duration / scenario.bin - 1e-9))
    _sample_gauges(recorder, contention, scenario, n_bins)
    extra = {"capacity_rate": None, "peak_to_capacity": None,
             "completion_time": contention.completion_time(recorder),
             "conflicts": len(recorder.rejected)}
    if progress is not None:
        progress(scenario.duration, scenario.duration)
    return Finished(scenario, recorder, n_bins, contention.pending, wall, extra=extra)

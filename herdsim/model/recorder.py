"""The recorder: the hot path appends event times to flat arrays; numpy bins them once.

Counters are typed arrays of event times (``attempts``, ``rejected`` …), binned with
``np.bincount`` at the end. Gauges (in flight, backlog …) are sampled at every bin start
by one process. Nothing here is touched per call except an ``append``. ``array.array``
stores 8 bytes a value where a list of floats costs 32: a 6-million-call run fits in RAM.
The frames are built without copies (``copy=False``: numpy views of the arrays, one block
a column), events are binned a chunk at a time, and the jobs frame takes the finish rows
over (the recorder lets go of them), so turning a run into frames does not double its
memory.
"""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from herdsim.policies.criticality import CLASSES

SUCCEEDED, DEAD_LETTERED, MERGED = 0, 1, 3  # 2 is "pending": a job with no finish row
# merged: collapsed into a job of the same key (workload.keys), which does its work
OUTCOMES = ("succeeded", "dead_lettered", "pending", "merged")

COUNTERS = ("arrivals", "attempts", "rejected", "timeouts", "errors", "wasted", "recycled",
            "refused", "crashes", "short_circuited", "budget_refused")
SHED = ("shed_admission", "shed_shedding", "shed_codel")  # a defended server's, by mechanism
BY_MECHANISM = (*SHED, "costly_refusals", "shed_priority")  # counters only a mechanism's runs have
MECHANISM_GAUGES = ("degradation",)  # a gauge only a mechanism's runs have (a degrading server)
GAUGES = ("in_flight", "waiting", "queue_depth", "delayed", "downstream_up", "breaker_open")
CHUNK = 1 << 20  # events binned at a time: the temporaries of a 10-million-call run stay small


class Recorder:
    """Flat arrays of everything that happened in one run."""

    # the COUNTERS: the time of each event
    arrivals: array[float]
    attempts: array[float]
    rejected: array[float]
    timeouts: array[float]
    errors: array[float]
    wasted: array[float]
    recycled: array[float]
    refused: array[float]
    crashes: array[float]
    short_circuited: array[float]
    budget_refused: array[float]

    def __init__(self) -> None:
        for name in COUNTERS:
            setattr(self, name, array("d"))
        self.poison_ids = array("q")  # the ids of poison jobs (most runs have none)
        self.sleep_time = array("d")
        self.sleep_job = array("q")
        self.sleep_attempt = array("q")
        self.sleep_value = array("d")
        # ids and attempt counts as 32-bit ints (an overflow raises): half the bytes a job
        self.finish_id = array("i")
        self.finish_time = array("d")
        self.finish_attempts = array("i")
        self.finish_outcome = array("b")
        self.taken = False  # whether jobs() has taken the finish rows over
        self.job_keys: array | None = None  # each job's key, by id (workload.keys only)
        self.job_classes: array | None = None  # each job's class (workload.criticality)
        self.gauges: dict[str, list[float]] = {name: [] for name in GAUGES}
        # counters only some runs have (a downstream that sheds calls): name -> times
        self.optional: dict[str, array] = {}

    def counter(self, name: str) -> array:
        """A counter column this run has beside the standard ones (created once)."""
        return self.optional.setdefault(name, array("d"))

    def record_sleep(self, now: float, job: int, attempt: int, sleep: float) -> None:
        self.sleep_time.append(now)
        self.sleep_job.append(job)
        self.sleep_attempt.append(attempt)
        self.sleep_value.append(sleep)

    # -- turning lists into frames (once, at the end) --------------------------------------

    def counts(self, times, bin_width: float, n_bins: int) -> np.ndarray:
        """Events per bin."""
        return self._binned(np.asarray(times, dtype=float), bin_width, n_bins)[0]

    @staticmethod
    def _binned(times: np.ndarray, bin_width: float, n_bins: int,
                outcome: np.ndarray | None = None, codes: tuple[int, ...] = ()
                ) -> list[np.ndarray]:
        """Events per bin of *times*, a chunk at a time; with *outcome* (one code an
        event), one count per code of *codes*, of the events with that outcome."""
        totals = [np.zeros(n_bins, dtype=np.int64) for _ in codes or (None,)]
        for start in range(0, times.size, CHUNK):
            index = (times[start:start + CHUNK] / bin_width).astype(np.int64)
            np.clip(index, 0, n_bins - 1, out=index)
            if outcome is None:
                totals[0] += np.bincount(index, minlength=n_bins)
                continue
            chunk = outcome[start:start + CHUNK]
            for total, code in zip(totals, codes, strict=True):
                total += np.bincount(index[chunk == code], minlength=n_bins)
        return totals

    def timeseries(self, bin_width: float, n_bins: int) -> pd.DataFrame:
        """One row per bin: counters (events in the bin) and gauges (value at bin start)."""
        columns: dict[str, np.ndarray] = {"time": np.arange(n_bins) * bin_width}
        columns["arrivals"] = self.counts(self.arrivals, bin_width, n_bins)
        columns["attempts"] = self.counts(self.attempts, bin_width, n_bins)
        success, dead = self._binned(np.asarray(self.finish_time, dtype=float), bin_width,
                                     n_bins, np.asarray(self.finish_outcome, dtype=np.int8),
                                     (SUCCEEDED, DEAD_LETTERED))
        columns["success"] = success
        columns["retry"] = self.counts(self.sleep_time, bin_width, n_bins)
        columns["failed_dlq"] = dead
        for name in COUNTERS[2:]:
            columns[name] = self.counts(getattr(self, name), bin_width, n_bins)
        for name, times in self.optional.items():
            columns[name] = self.counts(times, bin_width, n_bins)
        for name, samples in self.gauges.items():
            values = np.asarray(samples[:n_bins], dtype=float)
            if len(values) < n_bins:
                values = np.pad(values, (0, n_bins - len(values)), mode="edge")
            columns[name] = values
        return pd.DataFrame(columns, copy=False)

    def sleeps(self) -> pd.DataFrame:
        return pd.DataFrame({
            "time": np.asarray(self.sleep_time, dtype=float),
            "job": np.asarray(self.sleep_job, dtype=np.int64),
            "attempt": np.asarray(self.sleep_attempt, dtype=np.int64),
            "sleep": np.asarray(self.sleep_value, dtype=float),
        }, copy=False)

    def jobs(self, pending: list) -> pd.DataFrame:
        """One row per submitted job; *pending* are the job objects still in the system
        (those still queued as they arrived may be left out: they made no attempt).

        The frame takes the finish rows over: the recorder lets go of each of them once
        it is in its column (call it once, after :meth:`timeseries`)."""
        if self.taken:
            raise RuntimeError("Recorder.jobs: the finish rows went to an earlier jobs frame")
        self.taken = True
        n = len(self.arrivals)
        ids = np.asarray(self.finish_id)  # views of the arrays, no copies
        finish = np.full(n, np.nan)
        finish[ids] = np.asarray(self.finish_time, dtype=float)
        self.finish_time = array("d")
        attempts = np.zeros(n, dtype=np.int64)
        attempts[ids] = np.asarray(self.finish_attempts)
        self.finish_attempts = array("i")
        outcome = np.full(n, 2, dtype=np.int8)
        outcome[ids] = np.asarray(self.finish_outcome, dtype=np.int8)
        self.finish_outcome = array("b")
        del ids
        self.finish_id = array("i")
        for job in pending:
            attempts[job.id] = job.attempts
        arrival = np.asarray(self.arrivals, dtype=float)
        poison = np.zeros(n, dtype=bool)
        poison[np.asarray(self.poison_ids, dtype=np.int64)] = True
        keyed = self.job_keys is not None
        return pd.DataFrame({
            "job": np.arange(n),
            "arrival": arrival,
            "poison": poison,
            **({"key": np.asarray(self.job_keys, dtype=np.int64)} if keyed else {}),
            **({"criticality": pd.Categorical.from_codes(np.asarray(self.job_classes),
                                                         CLASSES)}
               if self.job_classes is not None else {}),
            "attempts": attempts,
            # "merged" only where a job can merge: other runs' files keep their categories
            "outcome": pd.Categorical.from_codes(outcome, OUTCOMES if keyed else OUTCOMES[:3]),
            "finish": finish,
            "latency": finish - arrival,
        }, copy=False)

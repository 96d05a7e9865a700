"""Late answers (``retry.late_answers``): an answer that arrives after the client's
timeout completes the job, as in most clients and in Metafor's model.

A call its client gave up on keeps its server busy (it is served as waste: a call
``DOOMED`` in service, or one ``ABANDONED`` in the waiting room and served anyway with
``serve_abandoned``). When that work ends, its answer reaches a client that still holds
the job (sleeping before its retry, or waiting on a later attempt): the job succeeds
then, once. A retry still sleeping is cancelled (not sent, not counted as a retry: its
sleep row is written only when the retry leaves); a later attempt already sent is left
to the server (the caller stays with it until it ends, then stops, without retrying). A
job that already ended (succeeded, gave up) ignores the answer. Each job completed so
is counted in the ``late_answers`` series.

The general loop (:func:`herdsim.model.worker.make_run_job`) is built with a
:class:`LateAnswers` hook when the scenario asks for them: the plain loops never hear of
them. A call is sent on behalf of an :class:`Attempt` (the job and its process), so the
end of wasted work finds its job; the at-start service's end-of-waste callback is wrapped
once, at build time.
The guards (breaker, budget, client limiter) do not hear a late answer, and an error
outage draws no 500 for one: the answer is a success (a poison job's is not).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from simpy import Interrupt

from herdsim.model.downstream.service import AtStart
from herdsim.model.recorder import SUCCEEDED
from herdsim.model.worker import make_retry

if TYPE_CHECKING:
    from herdsim.model.worker import Loops

LATE = "late answer"  # the interrupt's cause: a sleeping job's answer came


class Attempt:
    """Who a call is made for: the job and the process making it (the downstream's
    protocol: ``interrupt(cause)``)."""

    __slots__ = ("job", "proc")

    def __init__(self, job: Any, proc: Any):
        self.job, self.proc = job, proc

    def interrupt(self, cause: Any) -> None:
        """Its call failed at t0 (an outage, a crash): the process hears it."""
        self.proc.interrupt(cause)


class LateAnswers:
    """The hook :func:`herdsim.model.worker.make_run_job` is built with to hear late
    answers, wired into the downstream's
    service: the jobs answered, who a call is for, the retry step that holds a sleep's
    row until the retry leaves, and the sleep a late answer cuts short."""

    def __init__(self, sim: Loops):
        rec = sim.recorder
        self.in_hand, self.finish = sim.in_hand, sim.finish
        self.count = rec.counter("late_answers").append
        self.record_sleep = rec.record_sleep
        self.timeout = sim.env.timeout
        self.held: dict[int, tuple[float, int, int, float]] = {}  # job id -> its sleep row
        self.answered: set[Any] = set()  # jobs held whose late answer came
        self.sleeping: dict[Any, Any] = {}  # job -> the process sleeping before its retry
        self.retry = make_retry(sim, sim.give_up, self.hold)
        downstream = sim.downstream
        for pool in getattr(downstream, "replicas", [downstream]):  # a fleet: each replica's
            wrap_wasted(pool.service, pool, self.late)

    def hold(self, now: float, job_id: int, n: int, pause: float) -> None:
        """Keep a retry's sleep row until the retry leaves."""
        self.held[job_id] = (now, job_id, n, pause)

    def caller(self, job: Any, proc: Any) -> Attempt:
        """Who *job*'s calls are made for."""
        return Attempt(job, proc)

    def late(self, c: Any, now: float) -> None:
        """The server finished *c*, a call its client had given up on."""
        job = c.proc.job
        if job.poison or job not in self.in_hand or job in self.answered:
            return
        self.answered.add(job)
        self.count(now)
        self.held.pop(job.id, None)
        self.finish(job, now, SUCCEEDED)
        self.in_hand.discard(job)  # ended (its process may wait on its last call a while)
        proc = self.sleeping.pop(job, None)
        if proc is not None:
            proc.interrupt(LATE)

    def sleep(self, job: Any, proc: Any, pause: float) -> Generator[Any, Any, bool]:
        """Sleep *pause* before *job*'s retry; True when its late answer came meanwhile
        (the retry is not sent and its sleep row never written)."""
        self.sleeping[job] = proc
        try:
            yield self.timeout(pause)
        except Interrupt:
            return True
        del self.sleeping[job]
        self.record_sleep(*self.held.pop(job.id))
        return False


def wrap_wasted(service: Any, downstream: Any, late) -> None:
    """Have ``late(call, now)`` called when *service* (at-start: the scenario's check
    refuses processor sharing with late answers) ends the work of a call whose client
    had left, in the epoch it started in (a crash loses the work and its answer)."""
    assert isinstance(service, AtStart), "late answers need the at_start latency model"
    wasted_done = service._on_wasted

    def wasted_then_late(timer) -> None:
        wasted_done(timer)
        c = timer.call
        if c.epoch == downstream.epoch:
            late(c, downstream.env.now)

    service._on_wasted = wasted_then_late

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

This is its own loop, :func:`make_late_run_job` (``run_job`` with these steps), chosen
when the run is built: the plain loops and ``run_job`` gain nothing. A call is sent on
behalf of an :class:`Attempt` (the job and its process), so the end of wasted work finds
its job; the at-start service's end-of-waste callback is wrapped once, at build time.
The guards (breaker, budget, client limiter) do not hear a late answer, and an error
outage draws no 500 for one: the answer is a success (a poison job's is not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simpy import Interrupt

from herdsim.model.calls import OK
from herdsim.model.downstream.service import AtStart
from herdsim.model.recorder import SUCCEEDED
from herdsim.model.worker import Stall, acquiring, make_guards
from herdsim.policies.attempt import RetryHooks, heard_step, retry_step

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


def make_late_run_job(sim: Loops):
    """``run_job(job, gate)`` that hears late answers (see the module docstring), and the
    hook that delivers them, wired into the downstream's service."""
    env, timeout = sim.env, sim.env.timeout
    downstream = sim.downstream
    call, settle = downstream.call, downstream.finish
    client_timeout = sim.scenario.downstream.timeout
    in_hand, finish, give_up = sim.in_hand, sim.finish, sim.give_up
    rec, guards = sim.recorder, make_guards(sim)
    short_circuited, budget_refused = rec.short_circuited.append, rec.budget_refused.append
    late_count = rec.counter("late_answers").append
    record_sleep = rec.record_sleep
    breaker_cfg = sim.scenario.breaker
    retries_only, open_loop = breaker_cfg.retries_only, sim.scenario.workers.count is None
    overhead = sim.overhead  # what an attempt costs the client: a draw (None: nothing)
    heard = heard_step(breaker_cfg.slow_call_threshold, sim.retry_rules.throttling)
    held: dict[int, tuple[float, int, int, float]] = {}  # job id -> its retry's sleep row
    answered: set[Any] = set()  # jobs held whose late answer came
    sleeping: dict[Any, Any] = {}  # job -> the process sleeping before its retry

    def hold(now: float, job_id: int, n: int, pause: float) -> None:
        held[job_id] = (now, job_id, n, pause)

    retry = retry_step(sim.retry_rules, RetryHooks(give_up, hold, budget_refused, downstream))

    def late(c, now: float) -> None:
        """The server finished *c*, a call its client had given up on."""
        job = c.proc.job
        if job.poison or job not in in_hand or job in answered:
            return
        answered.add(job)
        late_count(now)
        held.pop(job.id, None)
        finish(job, now, SUCCEEDED)
        in_hand.discard(job)  # ended (its process may wait on its last call a while)
        proc = sleeping.pop(job, None)
        if proc is not None:
            proc.interrupt(LATE)

    for pool in getattr(downstream, "replicas", (downstream,)):  # a fleet: each replica
        wrap_wasted(pool.service, pool, late)

    def run_job(job, gate):
        proc, budget, gate, limiter = guards(gate)
        gates_calls = budget is not None and budget.gates_calls
        breaker = gate.breaker if gate is not None else None
        attempt = Attempt(job, proc)
        in_hand.add(job)
        stall = Stall()
        while True:
            if job in answered:  # its answer came while the breaker held it
                break
            now = env.now
            if gates_calls and not budget.allow_call(now, not job.retries):
                budget_refused(now)
                give_up(job, now)
                break
            if breaker is not None and (not retries_only or job.attempts) \
                    and not breaker.permit(now):
                short_circuited(now)
                if retries_only:
                    give_up(job, now)
                    break
                if not open_loop:  # a queue worker holding a job waits (sleep mode)
                    yield from gate.wait_jittered()  # type: ignore[union-attr]
                    continue
                outcome = None  # an open-loop caller sees a failed call
            else:
                if limiter is not None and limiter.enabled:
                    yield from acquiring(limiter, env, timeout)
                if overhead is not None:
                    yield timeout(overhead())
                    now = env.now
                if job in answered:  # its answer came while the client waited to send
                    break
                job.attempts += 1
                outcome = call(attempt, client_timeout)
                if outcome.__class__ is not int:
                    try:
                        outcome = settle(outcome, (yield outcome.event))
                    except Interrupt as failure:
                        outcome = failure.cause
                if job in answered:  # an earlier attempt's answer completed it meanwhile
                    break
                failed = outcome != OK or job.poison
                started, now = now, env.now
                heard(job, started, now, outcome, failed, breaker, limiter, budget)
                if not failed:
                    finish(job, now, SUCCEEDED)
                    break
            pause = retry(job, now, outcome, budget)
            if pause is None:
                break
            stall.check(job, now)
            sim.sleeping += 1
            sleeping[job] = proc
            try:
                yield timeout(pause)
            except Interrupt:  # its late answer came: the retry is not sent
                sim.sleeping -= 1
                break
            del sleeping[job]
            sim.sleeping -= 1
            record_sleep(*held.pop(job.id))
        in_hand.discard(job)
        answered.discard(job)

    return run_job


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

"""The worker loop: take a job, call downstream, then succeed, retry or dead-letter.

This is the hot path. Each ``make_*`` function binds what its step touches to closure
variables once per run and returns the step: ``finish`` (a job's row), ``give_up``,
``retry`` (the sleep before the next attempt, or giving up), and the two loops built on
them: ``run_job`` (every feature; queue workers run it from ``worker``, open-loop callers
``workers.count: null`` for one job each), and the fast paths when :func:`plain` holds:
``plain_worker`` for queue workers, ``plain_caller`` for open-loop callers. A call that
fails fast costs no event, a call that completes one.

Each ``make_*`` reads of the run only what :class:`Ends` or :class:`Loops` lists. The
decisions of an attempt (the retry, what the guards hear) are
:mod:`herdsim.policies.attempt`'s, shared with a call graph's edges and the testbed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from simpy import Interrupt

from herdsim.config.scenario import Scenario
from herdsim.config.schema import gates, member_places, value_at
from herdsim.errors import ScenarioError
from herdsim.model.calls import OK
from herdsim.model.gates import BreakerGate
from herdsim.model.kernel import call_later, urgent
from herdsim.model.recorder import DEAD_LETTERED, SUCCEEDED
from herdsim.model.workload import Job
from herdsim.policies.attempt import RetryHooks, RetryRules, RetryStep, heard_step, retry_step
from herdsim.policies.family import Member
from herdsim.policies.fields import RESOLUTION

if TYPE_CHECKING:
    from herdsim.model.downstream.core import Downstream
    from herdsim.model.hooks import LateHook
    from herdsim.model.kernel import Environment
    from herdsim.model.queues import DelayedQueue, JobQueue
    from herdsim.model.recorder import Recorder
    from herdsim.model.streams import Draws

SPIN_LIMIT = 10_000  # retries of one job at one instant that mean time stands still


class Frozen(Exception):  # noqa: N818 (a state, raised out of the SimPy run)
    """A job retried ``SPIN_LIMIT`` times at one instant (args: that instant)."""

    def error(self) -> ScenarioError:
        """The one-line error the user sees."""
        return ScenarioError([("workers.attempt_overhead",
                               f"simulated time stood still at t = {self.args[0]:g} s: a job "
                               f"retried {SPIN_LIMIT:,} times at that instant (zero sleeps "
                               "against fast failures); set workers.attempt_overhead, e.g. "
                               "1ms")])


class Stall:
    """The freeze guard: counts one job's retries at one instant and raises
    :class:`Frozen` at ``SPIN_LIMIT`` (time would stand still). One per loop that holds
    a job while it sleeps."""

    __slots__ = ("job", "at", "spins")

    def __init__(self):
        self.job, self.at, self.spins = None, -1.0, 0

    def check(self, job, now: float) -> None:
        """*job* retries at *now*."""
        if job is not self.job or now != self.at:
            self.job, self.at, self.spins = job, now, 0
        elif self.spins < SPIN_LIMIT:
            self.spins += 1
        else:
            raise Frozen(now)


class Ends(Protocol):
    """What the steps that end an attempt read of the run (``make_finish``,
    ``make_give_up``, ``make_retry``): the :class:`~herdsim.model.simulation.Simulation`
    is one."""

    scenario: Scenario
    recorder: Recorder
    delayed: DelayedQueue
    downstream: Downstream
    retry_rules: RetryRules


class Loops(Ends, Protocol):
    """What the loops read of the run besides (``make_keyed``, ``make_guards``,
    ``make_run_job``, ``worker``, the plain loops): the steps, the queues, the jobs in
    hand, the guards per owner."""

    env: Environment
    queue: JobQueue
    in_hand: set[Job]
    sleeping: int  # jobs sleeping before a retry (a gauge)
    keyed: bool
    finish: Callable[[Any, float, int], None]
    give_up: Callable[[Any, float], None]
    retry: RetryStep
    run_job: Callable[[Any, BreakerGate | None], Any]
    hedged: Callable[[Any], Any] | None  # the hedged call of a job, or None
    overhead: Draws | None  # workers.attempt_overhead, drawn per attempt (None: none)
    clients: Draws | None  # draws a client for an open-loop caller, or None
    client_gates: list[BreakerGate | None] | None

    def budget_for(self, owner: object) -> object | None: ...

    def limiter_for(self, owner: object) -> Any: ...


def finish_rows(rec):
    """The appends of a job's row (id, time, attempts, outcome), bound once."""
    return (rec.finish_id.append, rec.finish_time.append, rec.finish_attempts.append,
            rec.finish_outcome.append)


def make_finish(sim: Ends):
    """``finish(job, now, outcome)``: the job's row in the per-job table."""
    finish_id, finish_time, finish_attempts, finish_outcome = finish_rows(sim.recorder)

    def finish(job, now, outcome):
        finish_id(job.id)
        finish_time(now)
        finish_attempts(job.attempts)
        finish_outcome(outcome)

    return finish


def make_give_up(sim: Ends, finish):
    """``give_up(job, now)``: the job fails for good: to the DLQ, or without one back to
    the main queue once its redelivery delay has passed (like a visibility timeout)."""
    recycled, delay = sim.recorder.recycled.append, sim.delayed.add
    scenario = sim.scenario
    to_dlq = scenario.dlq.enabled or scenario.workers.count is None  # open loop: no queue
    redelivery, base = scenario.dlq.redelivery_delay, scenario.retry.base

    def give_up(job, now):
        if to_dlq:
            finish(job, now, DEAD_LETTERED)
        else:
            recycled(now)
            job.retries = 0
            job.prev = base
            delay(now + redelivery, job)

    return give_up


def make_retry(sim: Ends, give_up, record_sleep=None) -> RetryStep:
    """``retry(job, now, outcome, budget)``: the workers' retry step
    (:func:`herdsim.policies.attempt.retry_step`) with the scenario's retry rules, giving
    up through *give_up*, recording into the run's recorder (a sleep's row through
    *record_sleep* when given), reading the downstream's Retry-After."""
    rec = sim.recorder
    return retry_step(sim.retry_rules, RetryHooks(give_up, record_sleep or rec.record_sleep,
                                                  rec.budget_refused.append, sim.downstream))


def make_keyed(sim: Loops):
    """``(finish, give_up, retry)`` counting failures per key, as client-go's
    ``ItemExponentialFailureRateLimiter`` does (``default_rate_limiters.go`` @v0.36.3
    :116-149): a retry's index is its key's failures so far (``NumRequeues``), which it
    then adds one to (``When``); a success or a job giving up deletes them (``Forget``).
    The strategy's memory (``prev``) follows the same count, per key, so a stateful
    strategy never sees one key's index with another history. Wraps the steps ``sim`` has
    (``workload.keys`` only)."""
    failures: dict = {}  # key -> (failures so far, the strategy's memory after the last)
    finish, give_up, retry = sim.finish, sim.give_up, sim.retry
    fresh = (0, sim.retry_rules.base)  # a key never failed: as a new job

    def keyed_finish(job, now, outcome):
        if outcome == SUCCEEDED:
            failures.pop(job.key, None)
        finish(job, now, outcome)

    def keyed_give_up(job, now):
        failures.pop(job.key, None)
        give_up(job, now)

    def keyed_retry(job, now, outcome, budget):
        job.retries, job.prev = failures.get(job.key, fresh)
        pause = retry(job, now, outcome, budget)
        if pause is None:  # it gave up
            failures.pop(job.key, None)
        else:
            failures[job.key] = (job.retries, job.prev)
        return pause

    return keyed_finish, keyed_give_up, keyed_retry


def make_guards(sim: Loops):
    """``guards(gate)``: the active process and the retry budget, breaker gate and client
    rate limiter that guard its calls (an open-loop caller's are its client's, the client
    drawn uniformly; else *gate* and the process's budget and limiter)."""
    env, budget_for, clients, client_gates = sim.env, sim.budget_for, sim.clients, sim.client_gates
    limiter_for = sim.limiter_for

    def guards(gate):
        proc = env.active_process
        if clients is None:
            return proc, budget_for(proc), gate, limiter_for(proc)
        client = clients()
        return (proc, budget_for(client), gate if client_gates is None else client_gates[client],
                limiter_for(client))

    return guards


def acquiring(limiter, env, timeout):
    """A generator: wait until *limiter* (a ``ClientRateLimiter``) lets a call leave,
    sleeping its waits (at least ``RESOLUTION``, so simulated time moves)."""
    wait = limiter.before_send(env.now)
    while wait > 0:
        yield timeout(max(wait, RESOLUTION))
        wait = limiter.before_send(env.now)


def make_run_job(sim: Loops, late: LateHook | None = None):
    """A generator function ``run_job(job, gate)`` that takes one job to its end:
    success, dead letter, recycling (DLQ off), or parking in the delayed queue. Built
    with *late* (:mod:`herdsim.model.late`; no requeue, hedging or keys with it) it hears
    late answers: an answered job ends at the next point its process reaches (a wait
    for the breaker, its call about to leave, a call, a sleep: that retry is not sent),
    and an attempt counts as its call leaves, after its overhead (else as it starts)."""
    env, timeout = sim.env, sim.env.timeout
    call, settle = sim.downstream.call, sim.downstream.finish
    client_timeout = sim.scenario.downstream.timeout  # the workers' own, sent with each call
    in_hand, finish, give_up = sim.in_hand, sim.finish, sim.give_up
    retry = sim.retry if late is None else late.retry
    answered = None if late is None else late.answered
    rec, delay, guards = sim.recorder, sim.delayed.add, make_guards(sim)
    short_circuited, budget_refused = rec.short_circuited.append, rec.budget_refused.append
    workers, breaker_cfg = sim.scenario.workers, sim.scenario.breaker
    open_loop, sleep_mode = workers.count is None, workers.retry_mode == "sleep"
    retries_only = breaker_cfg.retries_only
    overhead = sim.overhead  # what an attempt costs the client: a draw (None: nothing)
    hedged = sim.hedged  # None, or hedged(job): an event firing with a hedged call's outcome
    heard = heard_step(sim.scenario.breaker.slow_call_threshold, sim.retry_rules.throttling)

    def run_job(job, gate):
        proc, budget, gate, limiter = guards(gate)
        gates_calls = budget is not None and budget.gates_calls
        breaker = gate.breaker if gate is not None else None
        caller = proc if late is None else late.caller(job, proc)
        in_hand.add(job)
        stall = Stall()
        while True:
            now = env.now
            if gates_calls and not budget.allow_call(now, not job.retries):  # before a probe
                budget_refused(now)
                give_up(job, now)
                break
            if breaker is not None and (not retries_only or job.attempts) \
                    and not breaker.permit(now):
                short_circuited(now)
                if retries_only:
                    give_up(job, now)
                    break
                if not open_loop:  # a queue worker holding a job: wait, or park it
                    if sleep_mode:
                        yield from gate.wait_jittered()  # type: ignore[union-attr]
                        if answered is not None and job in answered:  # came meanwhile
                            break
                        continue
                    delay(max(breaker.open_until, now), job)
                    break
                outcome = None  # an open-loop caller sees a failed call
            else:
                if limiter is not None and limiter.enabled:
                    yield from acquiring(limiter, env, timeout)
                if answered is None:
                    job.attempts += 1
                if overhead is not None:  # what the attempt costs before the call leaves
                    yield timeout(overhead())
                    now = env.now
                if answered is not None:
                    if job in answered:  # its answer came while the client waited to send
                        break
                    job.attempts += 1
                if hedged is not None:
                    outcome = yield hedged(job)
                else:
                    outcome = call(caller, client_timeout)
                    if outcome.__class__ is not int:
                        try:
                            outcome = settle(outcome, (yield outcome.event))
                        except Interrupt as failure:
                            outcome = failure.cause
                if answered is not None and job in answered:  # an earlier attempt's answer
                    break  # completed it meanwhile
                failed = outcome != OK or job.poison
                started, now = now, env.now
                heard(job, started, now, outcome, failed, breaker, limiter, budget)
                if not failed:
                    finish(job, now, SUCCEEDED)
                    break
            if hedged is not None:  # a hedged call is not retried
                give_up(job, now)
                break
            pause = retry(job, now, outcome, budget)
            if pause is None:
                break
            if not sleep_mode:
                delay(now + pause, job)
                break
            stall.check(job, now)
            sim.sleeping += 1
            if late is None:
                yield timeout(pause)
            elif (yield from late.sleep(job, proc, pause)):  # its answer came: no retry
                sim.sleeping -= 1
                break
            sim.sleeping -= 1
        in_hand.discard(job)
        if answered is not None:
            answered.discard(job)

    return run_job


def worker(sim: Loops, gate: BreakerGate | None, leaves=None):
    """SimPy process of one queue worker: consume jobs while its breaker lets it; under an
    autoscaler, ``leaves()`` between jobs says whether it retires. With keys it tells the
    queue when it lets go of a job (``done``), and a wait may end with no job (every
    arrival collapsed into a key): it waits again."""
    env, take, get, run_job = sim.env, sim.queue.take, sim.queue.get, sim.run_job
    done = sim.queue.done if sim.keyed else None  # type: ignore[attr-defined]  # a KeyedQueue
    blocked = gate.breaker.blocked if gate is not None else None
    while True:
        if leaves is not None and leaves():
            return
        if blocked is not None:
            while blocked(env.now):
                yield from gate.wait_jittered()  # type: ignore[union-attr]  # blocked: a gate
        job = take(env.now)
        while job is None:
            job = yield get()
        yield from run_job(job, gate)
        if done is not None:
            done(job)


GATES = gates(Scenario)  # path -> off(value): the fields marked GatesCalls in the schema
MEMBERS = member_places(Scenario)  # where a member declares whether it keeps the fast path


def plain(scenario: Scenario) -> bool:
    """Whether nothing gates or shapes a worker's or caller's call: every feature that
    does (a field the schema marks :class:`~herdsim.config.schema.GatesCalls`: the
    breaker, a budget, per-attempt overhead, Retry-After, requeued retries …) is off.
    Then queue workers run :func:`make_plain_worker`'s loop instead of ``worker`` +
    ``run_job``, and open-loop callers :func:`make_plain_caller`'s instead of ``run_job``
    (chosen once per run). A family's member held there says so itself (its
    ``keeps_fast_path``: a budget, an enabled breaker, a client limiter, an autoscaler do
    not)."""
    return all(off(value_at(scenario, path)) for path, off in GATES.items()) and all(
        not isinstance(member, Member) or member.keeps_fast_path()  # (None, a duration …)
        for member in (value_at(scenario, path) for path in MEMBERS))


def make_plain_worker(sim: Loops):
    """A generator function ``plain_worker(proc)``: ``worker`` with ``run_job`` inlined
    and the checks :func:`plain` rules out dropped, the same steps in the same order, one
    generator frame per resume instead of two. *proc* is the
    :class:`~herdsim.model.kernel.Runner` that drives it. Everything a worker touches is
    bound here once, for all of them (100,000 workers do not hold 100,000 copies).
    """
    env, take, get = sim.env, sim.queue.take, sim.queue.get
    call, settle = sim.downstream.call, sim.downstream.finish
    client_timeout = sim.scenario.downstream.timeout  # the workers' own, sent with each call
    in_hand, retry = sim.in_hand, sim.retry
    # (plain rules out keys, whose finish is not the plain row)
    finish_id, finish_time, finish_attempts, finish_outcome = finish_rows(sim.recorder)

    def plain_worker(proc):
        send = proc.send  # this generator's own: the callback of whatever it waits for
        stall = Stall()
        yield  # the Runner's start event resumes it from here
        while True:
            job = take(env.now)
            if job is None:
                get().callbacks.append(send)
                job = (yield).value
            in_hand.add(job)
            while True:
                job.attempts += 1
                outcome = call(proc, client_timeout)
                if outcome.__class__ is not int:
                    proc.target = event = outcome.event
                    event.callbacks.append(send)
                    try:
                        outcome = settle(outcome, (yield).value)
                    except Interrupt as failure:
                        outcome = failure.cause
                now = env.now
                if outcome == OK and not job.poison:  # (finish, inlined)
                    finish_id(job.id)
                    finish_time(now)
                    finish_attempts(job.attempts)
                    finish_outcome(SUCCEEDED)
                    break
                pause = retry(job, now, outcome, None)
                if pause is None:
                    break
                stall.check(job, now)
                sim.sleeping += 1
                call_later(env, pause, send)
                yield
                sim.sleeping -= 1
            in_hand.discard(job)

    return plain_worker


def make_plain_caller(sim: Loops):
    """The class of a job that is its own open-loop caller: ``run_job`` with the checks
    :func:`plain` rules out dropped, driven by callbacks instead of a ``simpy.Process``,
    the same steps in the same order, the same events, no generator, no process and no
    object besides the job. ``attempt()`` makes its first attempt at once, for a caller
    that the events due now would reach next anyway (see
    :class:`~herdsim.model.workload.OpenArrivals`); ``start()`` makes it at an ``URGENT``
    event now, as a process starts. A caller stands in for the process the downstream's
    protocol expects (``interrupt``)."""
    env = sim.env
    call, settle = sim.downstream.call, sim.downstream.finish
    client_timeout = sim.scenario.downstream.timeout  # the workers' own, sent with each call
    in_hand, finish, retry = sim.in_hand, sim.finish, sim.retry
    # (plain rules out keys, whose finish is not the plain row)
    finish_id, finish_time, finish_attempts, finish_outcome = finish_rows(sim.recorder)

    class Caller(Job):
        __slots__ = ("waiting", "stall")
        waiting: Any  # its call in flight (a calls.Call)
        stall: Stall  # made at its first retry

        def start(self) -> None:
            """Make the first attempt at an ``URGENT`` event now."""
            urgent(env).callbacks.append(self.attempt)

        def attempt(self, _event=None) -> None:
            """Call the downstream now; a call in flight answers :meth:`heard`."""
            in_hand.add(self)  # (again at a retry: no change)
            self.attempts += 1
            c = call(self, client_timeout)
            if c.__class__ is int:
                self.outcome(c)
                return
            self.waiting = c
            c.event.callbacks.append(self.heard)  # type: ignore[union-attr]  # (a Call)

        def heard(self, event) -> None:
            c, self.waiting = self.waiting, None  # (no cycle with its call)
            outcome = settle(c, event.value)
            if outcome == OK and not self.poison:  # (outcome's first branch, inlined)
                finish_id(self.id)
                finish_time(env.now)
                finish_attempts(self.attempts)
                finish_outcome(SUCCEEDED)
                in_hand.discard(self)
                return
            self.outcome(outcome)

        def interrupt(self, cause) -> None:
            """Its call failed at t0 (a ``down`` outage, a crash): *cause* is the outcome,
            ahead of the events due now, as ``Process.interrupt`` delivers it."""
            urgent(env, cause).callbacks.append(self._interrupted)

        def _interrupted(self, timer) -> None:
            self.waiting.event.callbacks.remove(self.heard)
            self.waiting = None
            self.outcome(timer.value)

        def outcome(self, outcome) -> None:
            """Succeed, sleep before the next attempt, or give up."""
            now = env.now
            if outcome == OK and not self.poison:
                finish(self, now, SUCCEEDED)
            else:
                pause = retry(self, now, outcome, None)
                if pause is not None:
                    stall = getattr(self, "stall", None)
                    if stall is None:
                        self.stall = stall = Stall()
                    stall.check(self, now)
                    sim.sleeping += 1
                    call_later(env, pause, self.woke)
                    return
            in_hand.discard(self)

        def woke(self, timer) -> None:
            sim.sleeping -= 1
            self.attempt(timer)

    return Caller

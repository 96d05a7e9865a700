"""The worker loop: take a job, call downstream, then succeed, retry or dead-letter.

This is the hot path. ``job_runner`` binds everything a job's life touches to closure
variables once per run; a call that fails fast costs no event, a call that completes one.
Queue workers run ``worker``; open-loop callers (``workers.count: null``) run one job each.
"""

from __future__ import annotations

from simpy import Interrupt

from herdsim.errors import ScenarioError
from herdsim.model.calls import OK, REJECTED, THROTTLED, TIMEOUT
from herdsim.model.gates import BreakerGate
from herdsim.model.kernel import later
from herdsim.model.recorder import DEAD_LETTERED, SUCCEEDED
from herdsim.policies import retry_after

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


def giving_up(sim):
    """``give_up(job, now)``: the job fails for good: to the DLQ, or without one back to
    the main queue once its redelivery delay has passed (like a visibility timeout)."""
    rec = sim.recorder
    finish_id, finish_time = rec.finish_id.append, rec.finish_time.append
    finish_attempts, finish_outcome = rec.finish_attempts.append, rec.finish_outcome.append
    recycled, delay = rec.recycled.append, sim.delayed.add
    scenario = sim.scenario
    to_dlq = scenario.dlq.enabled or scenario.workers.count is None  # open loop: no queue
    redelivery, base = scenario.dlq.redelivery_delay, scenario.retry.base

    def give_up(job, now):
        if to_dlq:
            finish_id(job.id)
            finish_time(now)
            finish_attempts(job.attempts)
            finish_outcome(DEAD_LETTERED)
        else:
            recycled(now)
            job.retries = 0
            job.prev = base
            delay(now + redelivery, job)

    return give_up


def job_runner(sim):
    """A generator function ``run_job(job, gate)`` that takes one job to its end:
    success, dead letter, recycling (DLQ off), or parking in the delayed queue."""
    env = sim.env
    call = sim.downstream.call
    finish = sim.downstream.finish
    in_hand = sim.in_hand
    rec = sim.recorder
    finish_id = rec.finish_id.append
    finish_time = rec.finish_time.append
    finish_attempts = rec.finish_attempts.append
    finish_outcome = rec.finish_outcome.append
    record_sleep = rec.record_sleep
    short_circuited = rec.short_circuited.append
    budget_refused = rec.budget_refused.append
    scenario = sim.scenario
    retry = scenario.retry
    max_retries = retry.max_retries
    poison_retryable = retry.poison_retryable
    draw = sim.strategy.sleep
    stateful = sim.strategy.stateful
    rng = sim.strategy_rng
    # after a throttling answer (a 429: THROTTLED or REJECTED) when its base differs
    throttling_draw = sim.throttling_strategy.sleep if sim.throttling_strategy else None
    open_loop = scenario.workers.count is None
    sleep_mode = scenario.workers.retry_mode == "sleep"
    delay = sim.delayed.add
    timeout = env.timeout
    retries_only = scenario.breaker.retries_only
    slow_threshold = scenario.breaker.slow_call_threshold
    clients, client_gates = sim.clients, sim.client_gates
    downstream = sim.downstream
    heed = retry_after.rule(retry.retry_after, retry.retry_after_limit)  # read after a 429
    overhead = scenario.workers.attempt_overhead

    give_up = giving_up(sim)

    def run_job(job, gate):
        proc = env.active_process
        if clients is None:
            budget = sim.budget_for(proc)
        else:  # an open-loop caller of one of the clients, drawn uniformly
            client = clients()
            budget = sim.budget_for(client)
            if client_gates is not None:
                gate = client_gates[client]
        gates_calls = budget is not None and budget.gates_calls
        breaker = gate.breaker if gate is not None else None
        in_hand.add(job)
        spun_at, spins = -1.0, 0  # retries of this job at one instant (the freeze guard)
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
                        yield from gate.wait_jittered()
                        continue
                    delay(max(breaker.open_until, now), job)
                    break
                outcome = None  # an open-loop caller sees a failed call
            else:
                job.attempts += 1
                if overhead:  # what the attempt costs the client before the call leaves
                    yield timeout(overhead)
                    now = env.now
                outcome = call(proc)
                if outcome.__class__ is not int:
                    try:
                        outcome = finish(outcome, (yield outcome.event))
                    except Interrupt as failure:
                        outcome = failure.cause
                failed = outcome != OK or job.poison
                started, now = now, env.now
                if breaker is not None:
                    breaker.record(now, failed,
                                   slow_threshold is not None and now - started >= slow_threshold)
                if budget is not None:
                    budget.on_result(now, not failed, job.paid)
                    job.paid = 0.0
                if not failed:
                    finish_id(job.id)
                    finish_time(now)
                    finish_attempts(job.attempts)
                    finish_outcome(SUCCEEDED)
                    break
            n = job.retries
            if (job.poison and not poison_retryable) or (
                max_retries is not None and n >= max_retries
            ):
                give_up(job, now)
                break
            throttled = outcome in (THROTTLED, REJECTED)
            if budget is not None:
                allowed, job.paid = budget.allow_retry(now, outcome == TIMEOUT, throttled)
                if not allowed:
                    budget_refused(now)
                    give_up(job, now)
                    break
            sleep = throttling_draw if throttled and throttling_draw else draw
            if stateful:
                pause, job.prev = sleep(n, job.prev, rng)
            else:
                pause = job.prev = sleep(n, job.prev, rng)
            if heed is not None and throttled:
                hint = downstream.retry_after
                if hint is not None:
                    pause = heed(pause, hint)
            job.retries = n + 1
            record_sleep(now, job.id, n, pause)
            if sleep_mode:
                if now != spun_at:
                    spun_at, spins = now, 0
                elif spins < SPIN_LIMIT:
                    spins += 1
                else:
                    raise Frozen(now)
                sim.sleeping += 1
                yield timeout(pause)
                sim.sleeping -= 1
            else:
                delay(now + pause, job)
                break
        in_hand.discard(job)

    return run_job


def worker(sim, gate: BreakerGate | None):
    """SimPy process of one queue worker: consume jobs while its breaker lets it."""
    env = sim.env
    items = sim.queue.items
    get = sim.queue.get
    clock, catch_up = sim.clock, sim.queue.catch_up
    run_job = sim.run_job
    blocked = gate.breaker.blocked if gate is not None else None
    while True:
        if blocked is not None:
            while blocked(env.now):
                yield from gate.wait_jittered()
        if clock.next_at <= env._now:
            catch_up(env._now)
        job = items.popleft() if items else (yield get())
        yield from run_job(job, gate)


def plain(scenario) -> bool:
    """Whether nothing gates or shapes a queue worker's call: no breaker, no budget, no
    per-attempt overhead, no Retry-After, no throttling base, retries slept in the worker. Then
    :func:`plain_worker` runs instead of ``worker`` + ``run_job`` (chosen once per run)."""
    return (scenario.workers.count is not None and scenario.workers.retry_mode == "sleep"
            and not scenario.breaker.enabled and scenario.budget is None
            and not scenario.workers.attempt_overhead
            and scenario.retry.retry_after == "ignore"
            and scenario.retry.throttling_base is None)


def plain_workers(sim):
    """A generator function ``plain_worker(proc)``: ``worker`` with ``run_job`` inlined
    and the checks :func:`plain` rules out dropped, the same steps in the same order, one
    generator frame per resume instead of two. *proc* is the
    :class:`~herdsim.model.kernel.Runner` that drives it. Everything a worker touches is
    bound here once, for all of them (100,000 workers do not hold 100,000 copies).
    """
    env = sim.env
    items = sim.queue.items
    get = sim.queue.get
    call = sim.downstream.call
    finish = sim.downstream.finish
    in_hand = sim.in_hand
    rec = sim.recorder
    finish_id = rec.finish_id.append
    finish_time = rec.finish_time.append
    finish_attempts = rec.finish_attempts.append
    finish_outcome = rec.finish_outcome.append
    record_sleep = rec.record_sleep
    retry = sim.scenario.retry
    max_retries = retry.max_retries
    poison_retryable = retry.poison_retryable
    draw = sim.strategy.sleep
    stateful = sim.strategy.stateful
    rng = sim.strategy_rng
    clock, catch_up = sim.clock, sim.queue.catch_up
    give_up = giving_up(sim)

    def plain_worker(proc):
        send = proc.send  # this generator's own: the callback of whatever it waits for
        yield  # the Runner's start event resumes it from here
        while True:
            if clock.next_at <= env._now:
                catch_up(env._now)
            if items:
                job = items.popleft()
            else:
                get().callbacks.append(send)
                job = (yield)._value
            in_hand.add(job)
            spun_at, spins = -1.0, 0
            while True:
                job.attempts += 1
                outcome = call(proc)
                if outcome.__class__ is not int:
                    proc.target = event = outcome.event
                    event.callbacks.append(send)
                    try:
                        outcome = finish(outcome, (yield)._value)
                    except Interrupt as failure:
                        outcome = failure.cause
                now = env.now
                if outcome == OK and not job.poison:
                    finish_id(job.id)
                    finish_time(now)
                    finish_attempts(job.attempts)
                    finish_outcome(SUCCEEDED)
                    break
                n = job.retries
                if (job.poison and not poison_retryable) or (
                    max_retries is not None and n >= max_retries
                ):
                    give_up(job, now)
                    break
                if stateful:
                    pause, job.prev = draw(n, job.prev, rng)
                else:
                    pause = job.prev = draw(n, job.prev, rng)
                job.retries = n + 1
                record_sleep(now, job.id, n, pause)
                if now != spun_at:
                    spun_at, spins = now, 0
                elif spins < SPIN_LIMIT:
                    spins += 1
                else:
                    raise Frozen(now)
                sim.sleeping += 1
                later(env, pause).callbacks.append(send)
                yield
                sim.sleeping -= 1
            in_hand.discard(job)

    return plain_worker

"""The worker loop: take a job, call downstream, then succeed, retry or dead-letter.

This is the hot path. Everything it touches is bound to a local once; a call that
fails fast costs no event, a call that completes costs one.
"""

from __future__ import annotations

from simpy import Interrupt

from .downstream import OK
from .recorder import DEAD_LETTERED, SUCCEEDED


def worker(sim):
    """SimPy process of one queue worker (``retry_mode`` sleep or requeue)."""
    env = sim.env
    proc = env.active_process
    items = sim.queue.items
    get = sim.queue.get
    put_back = sim.queue.put
    call = sim.downstream.call
    finish = sim.downstream.finish
    in_hand = sim.in_hand
    rec = sim.recorder
    finish_id = rec.finish_id.append
    finish_time = rec.finish_time.append
    finish_attempts = rec.finish_attempts.append
    finish_outcome = rec.finish_outcome.append
    record_sleep = rec.record_sleep
    recycled = rec.recycled.append
    retry = sim.scenario.retry
    max_retries = retry.max_retries
    poison_retryable = retry.poison_retryable
    dlq = sim.scenario.dlq.enabled
    base = retry.base
    draw = sim.strategy.sleep
    stateful = sim.strategy.stateful
    rng = sim.strategy_rng
    sleep_mode = sim.scenario.workers.retry_mode == "sleep"
    delay = sim.delayed.add if not sleep_mode else None
    timeout = env.timeout

    while True:
        job = items.popleft() if items else (yield get())
        in_hand.add(job)
        while True:
            job.attempts += 1
            outcome = call(proc)
            if outcome.__class__ is not int:
                try:
                    outcome = finish(outcome, (yield outcome.event))
                except Interrupt as failure:
                    outcome = failure.cause
            if outcome == OK and not job.poison:
                finish_id(job.id)
                finish_time(env._now)
                finish_attempts(job.attempts)
                finish_outcome(SUCCEEDED)
                break
            n = job.retries
            if (job.poison and not poison_retryable) or (
                max_retries is not None and n >= max_retries
            ):
                if dlq:
                    finish_id(job.id)
                    finish_time(env._now)
                    finish_attempts(job.attempts)
                    finish_outcome(DEAD_LETTERED)
                else:  # no DLQ: the job goes back on the main queue, retry count reset
                    recycled(env._now)
                    job.retries = 0
                    job.prev = base
                    put_back(job)
                break
            if stateful:
                pause, job.prev = draw(n, job.prev, rng)
            else:
                pause = job.prev = draw(n, job.prev, rng)
            job.retries = n + 1
            record_sleep(env._now, job.id, n, pause)
            if sleep_mode:
                sim.sleeping += 1
                yield timeout(pause)
                sim.sleeping -= 1
            else:
                delay(env._now + pause, job)
                break
        in_hand.discard(job)

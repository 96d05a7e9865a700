"""Criticality classes at run time (``workload.criticality``; docs/model.md, Priority
classes): each accepted job draws its class from its own stream, and the workers'
downstream (each replica of a fleet) files its waiting calls by class
(:class:`~herdsim.policies.criticality.ClassedRoom`: a free slot takes the highest
class first); with a bounded room, a call finding it full pushes out the newest waiting
call of the lowest class below its own (answered 503 at once, counted in ``rejected``
and ``shed_priority``). All of it is set up here, at build time, for a run with classes
only."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from herdsim.model.calls import ABANDONED, REJECTED, WAITING
from herdsim.model.kernel import trigger_later
from herdsim.model.streams import draws
from herdsim.policies.criticality import CLASSES, DEFAULT, ClassedRoom


def classed_new_job(sim, rng, base: Callable) -> Callable:
    """*base* (a ``new_job``) with each accepted job's class drawn from *rng* and
    recorded in id order; always a job, never an id."""
    draw = draws(sim.scenario.workload.criticality.sampler(rng))
    record = sim.recorder.job_classes = array("b")

    def new_job(now: float, lazy: bool = False):
        job = base(now)
        if job is not None:
            job.criticality = klass = int(draw())
            record.append(klass)
        return job

    return new_job


def file_by_class(sim) -> None:
    """Give the workers' downstream (or each of its replicas) a waiting room by class,
    with a bounded room the push-out of a lower class, and its defences (built by class:
    :mod:`~herdsim.model.downstream.classed`) each caller's class and the factors."""
    jobs: dict = sim.in_hand.jobs

    def klass(proc: Any) -> int:
        job = jobs.get(proc)
        return job.criticality if job is not None else DEFAULT

    shed = sim.recorder.counter("shed_priority").append
    ds = sim.downstream
    factors = sim.scenario.workload.criticality.factors()
    for pool in getattr(ds, "replicas", (ds,)):
        pool._waiting = ClassedRoom(lambda c: klass(c.proc))
        by_class = getattr(pool, "by_class", None)  # its defences (downstream/classed.py)
        if by_class is not None:
            by_class(klass, factors)
        if pool.queue_limit is not None:
            _evicting(pool, klass, shed)


def _evicting(pool, klass: Callable[[Any], int], shed: Callable[[float], None]) -> None:
    own, room, env = pool.call, pool._waiting, pool.env

    def call(proc, timeout):
        if pool.busy >= pool.concurrency and pool.in_room() >= pool.queue_limit:
            _push_out(pool, room, klass(proc), env.now, shed)
        return own(proc, timeout)

    pool.call = call


def _push_out(pool, room: ClassedRoom, mine: int, now: float, shed) -> None:
    """The newest live waiting call of the lowest class below *mine* leaves, refused."""
    for k in range(len(CLASSES) - 1, mine, -1):
        for c in reversed(room.rooms[k]):
            if c.state != WAITING:
                continue
            room.remove(c, k)
            pool.n_waiting -= 1
            pool.active.pop(c, None)
            left = getattr(pool, "_left", None)  # a defended pool's limiter lets it go
            if left is not None:
                left(c, now, True)
            c.state = ABANDONED  # its deadline, still armed, now does nothing
            c.retry_after = None
            pool._rejected(now)
            shed(now)
            trigger_later(pool.env, c.event, REJECTED)
            return

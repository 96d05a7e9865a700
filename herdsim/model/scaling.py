"""The worker pool under an autoscaler: workers started and retired during the run.

Every ``interval`` the :class:`~herdsim.policies.autoscale.Autoscaler` reads the main
queue's depth or the fraction of workers holding a job and names a count. Scale-out starts
new workers at once (first cancelling retirements not yet done). Scale-in takes idle
workers out of the queue's line at once; the rest retire when they finish the job in hand
(its retries included).
"""

from __future__ import annotations

from herdsim.policies.autoscale import Autoscaler


class Pool:
    """The workers alive and the retirements owed; ``start()`` adds one worker."""

    def __init__(self, sim, start):
        self.sim = sim
        self.start = start
        self.alive = 0
        self.retiring = 0  # busy workers that leave when their job is done

    def grow(self, n: int) -> None:
        cancelled = min(n, self.retiring)
        self.retiring -= cancelled
        for _ in range(n - cancelled):
            self.alive += 1
            self.start()

    def shrink(self, n: int) -> None:
        idle = self.sim.queue.dismiss(n)
        self.alive -= idle
        self.retiring += n - idle

    def leaves(self) -> bool:
        """Called by a worker between jobs: whether it retires now."""
        if self.retiring:
            self.retiring -= 1
            self.alive -= 1
            return True
        return False

    @property
    def size(self) -> int:
        """The workers the pool is headed for (alive, minus those retiring)."""
        return self.alive - self.retiring


def autoscaler(sim, pool: Pool):
    """SimPy process: decide every ``interval``, and grow or shrink the pool."""
    env, queue, in_hand = sim.env, sim.queue, sim.in_hand
    cfg = sim.scenario.workers.autoscale
    scaler = Autoscaler(cfg)
    while True:
        yield env.timeout(cfg.interval)
        now = env.now
        current = pool.size
        busy = len(in_hand) / pool.alive if pool.alive else 0.0
        want = scaler.decide(now, current, queue.depth(now), busy)
        if want > current:
            pool.grow(want - current)
        elif want < current:
            pool.shrink(current - want)

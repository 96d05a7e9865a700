"""Jobs arriving on the main queue: Poisson, constant or bursty, with rate spikes."""

from __future__ import annotations

from bisect import bisect_right

from herdsim.config.scenario import Workload


class Job:
    """One message on the queue. ``prev`` is the strategy's memory (the last sleep);
    ``paid`` what the retry budget charged for its pending retry."""

    __slots__ = ("id", "poison", "attempts", "retries", "prev", "paid")

    def __init__(self, job_id: int, poison: bool, prev: float):
        self.id = job_id
        self.poison = poison
        self.attempts = 0
        self.retries = 0
        self.prev = prev
        self.paid = 0.0


class RateSchedule:
    """The arrival rate over time: the base rate, replaced by each spike while it lasts."""

    def __init__(self, cfg: Workload):
        self.edges = [0.0]
        self.rates = [cfg.rate]
        for spike in sorted(cfg.spikes, key=lambda s: s.at):
            end = spike.at + spike.duration
            self.edges += [spike.at, end]
            self.rates += [spike.rate, cfg.rate]

    def at(self, t: float) -> tuple[float, float]:
        """The rate at *t* and the time it next changes."""
        i = bisect_right(self.edges, t) - 1
        nxt = self.edges[i + 1] if i + 1 < len(self.edges) else float("inf")
        return self.rates[i], nxt


def arrivals(sim):
    """SimPy process: create jobs and put them on the main queue."""
    cfg: Workload = sim.scenario.workload
    env = sim.env
    schedule = RateSchedule(cfg)
    gap_draw = sim.unit_exponential
    burst = cfg.burst_size if cfg.arrivals == "burst" else 1
    for _ in range(cfg.backlog):
        sim.submit()
    poisson = cfg.arrivals == "poisson"
    rate, change = schedule.at(0.0)
    while True:
        gap = gap_draw() / rate if poisson else burst / rate
        if env.now + gap >= change:  # the rate changes first (Poisson is memoryless)
            yield env.timeout(change - env.now)
            rate, change = schedule.at(env.now)
            continue
        yield env.timeout(gap)
        for _ in range(burst):
            sim.submit()

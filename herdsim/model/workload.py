"""Jobs arriving on the main queue: Poisson, constant or bursty, with rate spikes."""

from __future__ import annotations

from bisect import bisect_right

from herdsim.config.scenario import Workload
from herdsim.model.kernel import at


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


class ArrivalClock:
    """When jobs arrive: Poisson, constant or burst gaps at the rate of the moment.

    ``next_at`` is the time of the next arrival (``burst`` jobs at once); ``advance()``
    draws the one after it. A rate change between two arrivals restarts the gap there
    (Poisson arrivals are memoryless: the gap is drawn afresh at the new rate). The times
    are the sums a chain of timers would reach: each gap added to the previous arrival's
    time, a restart at ``t + (change - t)``.
    """

    def __init__(self, cfg: Workload, gap_draw):
        self.schedule = RateSchedule(cfg)
        self.rate, self.change = self.schedule.at(0.0)
        self.poisson = cfg.arrivals == "poisson"
        self.burst = cfg.burst_size if cfg.arrivals == "burst" else 1
        self.gap_draw = gap_draw
        self.next_at = 0.0
        self.advance()

    def advance(self) -> None:
        """Move ``next_at`` past the arrival it names."""
        t = self.next_at
        while True:
            gap = self.gap_draw() / self.rate if self.poisson else self.burst / self.rate
            if t + gap < self.change:
                self.next_at = t + gap
                return
            t += self.change - t
            self.rate, self.change = self.schedule.at(t)


class OpenArrivals:
    """Open loop: every arriving job is its own caller, started by ``start(job)``; one
    timer per arrival (a burst is one)."""

    def __init__(self, env, clock: ArrivalClock, new_job, start):
        self.env = env
        self.clock = clock
        self.new_job = new_job
        self.start = start
        self._on_arrival = self._arrive  # bound once, not once per timer
        self._arm()

    def _arm(self) -> None:
        at(self.env, self.clock.next_at).callbacks.append(self._on_arrival)

    def _arrive(self, _timer) -> None:
        now = self.env.now
        for _ in range(self.clock.burst):
            job = self.new_job(now)
            if job is not None:
                self.start(job)
        self.clock.advance()
        self._arm()

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


class Arrivals:
    """The arrival clock: one timer per arrival (a burst is one), and no process of its own.

    Each timer's callback asks ``new_job`` for the jobs (``None`` for one the main queue
    refused) and hands them on. In a worker pool the main queue is told of every timer
    (``queue.arm``): the first idle worker waits on the timer itself, so a job that finds
    a worker idle costs one event, and that worker receives the burst's first job as the
    timer's value. Without a pool (``queue`` is None) every job goes to ``start``.
    """

    def __init__(self, env, cfg: Workload, gap_draw, new_job, queue=None, start=None):
        self.env = env
        self.schedule = RateSchedule(cfg)
        self.rate, self.change = self.schedule.at(0.0)
        self.poisson = cfg.arrivals == "poisson"
        self.burst = cfg.burst_size if cfg.arrivals == "burst" else 1
        self.gap_draw = gap_draw
        self.new_job = new_job
        self.queue = queue
        self.start = start
        deliver = queue.put if queue is not None else start
        for _ in range(cfg.backlog):
            job = new_job()
            if job is not None:
                deliver(job)
        self._next()

    def _next(self) -> None:
        """Arm the timer of the next arrival, or of the next rate change if that is first
        (Poisson arrivals are memoryless: the gap is drawn afresh at the new rate)."""
        env = self.env
        gap = self.gap_draw() / self.rate if self.poisson else self.burst / self.rate
        if env._now + gap >= self.change:
            timer = env.timeout(self.change - env._now)
            timer.callbacks.append(self._rate_changed)
            return
        timer = env.timeout(gap)
        timer.callbacks.append(self._arrive)
        if self.queue is not None:
            self.queue.arm(timer)

    def _rate_changed(self, _timer) -> None:
        self.rate, self.change = self.schedule.at(self.env._now)
        self._next()

    def _arrive(self, timer) -> None:
        new_job, queue = self.new_job, self.queue
        if queue is None:
            for _ in range(self.burst):
                job = new_job()
                if job is not None:
                    self.start(job)
        else:
            waiting = queue.disarm(timer)  # a worker resumes from this timer after us
            for _ in range(self.burst):
                job = new_job()
                if job is None:
                    continue
                if waiting:
                    timer._value = job
                    waiting = False
                else:
                    queue.put(job)
        self._next()

"""Jobs arriving on the main queue: Poisson, constant or bursty, with rate spikes, rate
profiles with ramps, or the times of a recorded trace."""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from herdsim.config import trace as traces
from herdsim.config.sections import Workload
from herdsim.model.kernel import at
from herdsim.model.streams import Draws, draws


class Job:
    """One message on the queue. ``prev`` is the strategy's memory (the last sleep);
    ``paid`` what the retry budget charged for its pending retry; ``key`` the object it is
    about, set only with ``workload.keys`` (else never read)."""

    __slots__ = ("id", "poison", "attempts", "retries", "prev", "paid", "key")

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


class Piecewise:
    """The arrival rate over time as linear pieces: the profile's steps and ramps, each
    spike replacing it while it lasts. ``at(t)`` gives the rate at *t*, its slope and the
    time the piece ends."""

    def __init__(self, cfg: Workload):
        starts, rates, slopes = [], [], []
        previous = cfg.profile[0].rate
        for step in cfg.profile:
            if step.ramp:
                starts.append(step.at)
                rates.append(previous)
                slopes.append((step.rate - previous) / step.ramp)
            starts.append(step.at + step.ramp)
            rates.append(step.rate)
            slopes.append(0.0)
            previous = step.rate
        self._profile = (starts, rates, slopes)
        edges = set(starts)
        windows = sorted((s.at, s.at + s.duration, s.rate) for s in cfg.spikes)
        for begin, end, _ in windows:
            edges.update((begin, end))
        self.edges = sorted(edges)
        self.pieces = [self._piece(t, windows) for t in self.edges]

    def _piece(self, t: float, windows) -> tuple[float, float]:
        for begin, end, rate in windows:
            if begin <= t < end:
                return rate, 0.0
        starts, rates, slopes = self._profile
        i = bisect_right(starts, t) - 1
        return rates[i] + slopes[i] * (t - starts[i]), slopes[i]

    def at(self, t: float) -> tuple[float, float, float]:
        """The rate at *t*, its slope (per second) and the time the piece ends."""
        i = bisect_right(self.edges, t) - 1
        rate, slope = self.pieces[i]
        rate += slope * (t - self.edges[i])
        nxt = self.edges[i + 1] if i + 1 < len(self.edges) else math.inf
        return max(rate, 0.0), slope, nxt


    def integral(self, start: float, end: float) -> float:
        """Jobs expected in [*start*, *end*): the rate's integral (exact: pieces are
        linear)."""
        points = [start, *(e for e in self.edges if start < e < end), end]
        total = 0.0
        for a, b in zip(points[:-1], points[1:], strict=True):
            rate, slope, _ = self.at(a)
            total += (rate + slope * (b - a) / 2) * (b - a)
        return total


def gap(rate: float, slope: float, area: float) -> float:
    """The time after which a rate starting at *rate* and moving by *slope* per second has
    integrated to *area* (inf if it never does): the root of slope/2·g² + rate·g = area,
    written 2·area / (rate + sqrt(rate² + 2·slope·area)) to stay exact as slope → 0."""
    if slope == 0.0:
        return area / rate if rate > 0 else math.inf
    disc = rate * rate + 2.0 * slope * area
    if disc < 0:  # the rate falls to zero first
        return math.inf
    denominator = rate + math.sqrt(disc)
    return 2.0 * area / denominator if denominator > 0 else math.inf


class ProfileClock:
    """Arrivals under a rate profile, generated exactly by inversion: the next arrival
    is where the integral of the rate from the last one reaches a unit exponential
    (Poisson) or ``burst`` (constant, burst). A new piece restarts the draw at its start
    (for Poisson arrivals an exact restart: they are memoryless)."""

    def __init__(self, cfg: Workload, gap_draw):
        self.schedule = Piecewise(cfg)
        self.poisson = cfg.arrivals == "poisson"
        self.burst = cfg.burst_size if cfg.arrivals == "burst" else 1
        self.gap_draw = gap_draw
        self.next_at = 0.0
        self.advance()

    def advance(self) -> None:
        """Move ``next_at`` past the arrival it names."""
        t = self.next_at
        while True:
            rate, slope, change = self.schedule.at(t)
            area = self.gap_draw() if self.poisson else self.burst
            step = gap(rate, slope, area)
            if t + step < change:
                self.next_at = t + step
                return
            if change == math.inf:
                self.next_at = math.inf
                return
            t = change


class TraceClock:
    """Arrivals at the times of a recorded trace (× ``time_scale``, + ``start``), read
    one line at a time as the run reaches them; none after its last line."""

    burst = 1

    def __init__(self, cfg: Workload):
        trace = cfg.trace
        assert trace is not None, "arrivals: trace has a trace (validated)"
        self._times = traces.times(trace.file, trace.format)
        self._scale, self._start = trace.time_scale, trace.start
        self.next_at = 0.0
        self.advance()

    def advance(self) -> None:
        """Move ``next_at`` to the trace's next time."""
        value = next(self._times, None)
        self.next_at = math.inf if value is None else value * self._scale + self._start


Clock = ArrivalClock | ProfileClock | TraceClock
"""What a queue reads of any of them: ``next_at``, ``burst`` and ``advance()``."""


def clock(cfg: Workload, gap_draw) -> Clock:
    """The arrival clock *cfg* describes (the steady one unless a profile or a trace)."""
    if cfg.trace is not None:
        return TraceClock(cfg)
    if cfg.profile:
        return ProfileClock(cfg, gap_draw)
    return ArrivalClock(cfg, gap_draw)


def key_draws(cfg: Workload, rng: np.random.Generator) -> Draws:
    """Each job's key (``workload.keys``, numbered from 0): uniform with ``key_skew`` 0,
    else Zipf-like, key *i* with probability proportional to (i + 1)^-key_skew."""
    n = cfg.keys
    assert n is not None, "keys are drawn only with workload.keys"
    if not cfg.key_skew:
        return draws(lambda size: rng.integers(0, n, size))
    cdf = np.cumsum(np.arange(1, n + 1, dtype=float) ** -cfg.key_skew)
    return draws(lambda size: np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right"))


class OpenArrivals:
    """Open loop: every arriving job is its own caller, started by ``start(job)``; one
    timer per arrival (a burst is one)."""

    def __init__(self, env, clock: Clock, new_job, start):
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

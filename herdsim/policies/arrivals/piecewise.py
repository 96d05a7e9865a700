"""The arrival rate over time as linear pieces (pure: what the arrival clocks draw from,
and what analysis and planning integrate to know the offered load)."""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any


class Piecewise:
    """The arrival rate over time as linear pieces: the profile's steps and ramps (or the
    steady ``rate``), each spike replacing it while it lasts. ``at(t)`` gives the rate at
    *t*, its slope and the time the piece ends."""

    def __init__(self, cfg: Any):  # a scenario's ``workload`` section
        starts, rates, slopes = [], [], []
        steps = [(step.at, step.rate, step.ramp) for step in cfg.profile] \
            or [(0.0, cfg.rate, 0.0)]  # no profile: the steady rate
        previous = steps[0][1]
        for begin, rate, ramp in steps:
            if ramp:
                starts.append(begin)
                rates.append(previous)
                slopes.append((rate - previous) / ramp)
            starts.append(begin + ramp)
            rates.append(rate)
            slopes.append(0.0)
            previous = rate
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
        start, rate, slope, end = self.piece(t)
        return max(rate + slope * (t - start), 0.0), slope, end

    def piece(self, t: float) -> tuple[float, float, float, float]:
        """The piece in force at *t*: its start, its rate there, its slope and its end."""
        i = bisect_right(self.edges, t) - 1
        rate, slope = self.pieces[i]
        end = self.edges[i + 1] if i + 1 < len(self.edges) else math.inf
        return self.edges[i], rate, slope, end


    def integral(self, start: float, end: float) -> float:
        """Jobs expected in [*start*, *end*): the rate's integral (exact: pieces are
        linear)."""
        points = [start, *(e for e in self.edges if start < e < end), end]
        total = 0.0
        for a, b in zip(points[:-1], points[1:], strict=True):
            rate, slope, _ = self.at(a)
            total += (rate + slope * (b - a) / 2) * (b - a)
        return total

"""The downstream's token bucket in the fluid model: the distribution of its tokens, not
their mean.

A mean-field bucket fed at exactly its rate stays empty, so it admits every call and
refuses none; a bucket fed Poisson calls at its rate is a random walk between empty and
full: it refuses the calls that find it empty (about 1/(2 × burst) of them at a load of
one, by the reflected walk's local time) and banks tokens, half its burst on average,
which the next run of calls spends at once. retry_after.yaml lives on that edge: between
its waves of refused calls the load is the rate (docs/validation.md §7), so a mean bucket
reached each wave empty where the simulation's held about half its 100 tokens and let the
wave's first 60-odd calls through together.

So the tokens are a distribution over whole tokens (cells of ``scale`` tokens when the
burst is large) plus a fraction all of them share (the refill is deterministic); each step
refills ``rate × dt``, then its calls take a token each while there is a whole one: the
deterministic cohort a fixed amount, the calls of random timing a Poisson count. Its cost
is a few vector operations on at most :data:`CELLS` + 2 cells per step with calls.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import pdtr

CELLS = 256  # cells of the tokens' distribution at most: a burst beyond it is coarsened
WORK_CELLS = 12_000  # its work a step in the work estimate's kernel cells (2 ns each):
# up to 23 µs a step measured, at 256 cells and 1,000 calls a step
TINY = 1e-12


class TokenLaw:
    """A token bucket of ``rate`` tokens per second and ``burst`` banked, stepped by
    ``dt``, starting full (as :class:`~herdsim.policies.rate_limit.TokenBucket`)."""

    def __init__(self, rate: float, burst: float, dt: float):
        self.scale = max(1.0, burst / CELLS)  # tokens per cell
        self.top = int(math.floor(burst / self.scale + 1e-9))  # the full bucket's cell
        self.cells = np.zeros(self.top + 1)
        self.cells[self.top] = 1.0
        self.carry = 0.0  # the fraction of a cell every level holds beyond its cell
        self.fill = rate * dt / self.scale  # cells a step refills
        self.levels = np.arange(self.top + 1, dtype=float)
        self.ones = np.ones(self.top + 2)
        self.calls = np.floor((np.arange(self.top + 2) + 0.5) * self.scale)  # cells' edges

    def mean(self) -> float:
        """Tokens banked on average."""
        return (float(np.dot(self.cells, self.levels)) + self.carry) * self.scale

    def refill(self) -> None:
        """One step's tokens; a full bucket keeps none beyond its burst."""
        carry = self.carry + self.fill
        whole = int(carry)
        self.carry = carry - whole
        if whole:
            cells = self.cells
            if whole > self.top:
                cells[self.top] = 1.0
                cells[:self.top] = 0.0
            else:
                cells[self.top] = np.dot(cells[self.top - whole:], self.ones[:whole + 1])
                cells[whole:self.top] = cells[:self.top - whole].copy()
                cells[:whole] = 0.0
        if self.cells[self.top] > 1.0 - TINY:
            self.carry = 0.0  # full: nothing beyond the burst

    def take(self, total: float, randomised: float) -> float:
        """Calls admitted (on average) of *total* arriving this step, *randomised* of them
        of random timing (a Poisson count) and the rest a deterministic cohort."""
        before = self.mean()
        cohort = max(total - randomised, 0.0) / self.scale
        if cohort > TINY:
            self._lower(cohort)
        if randomised > TINY:
            self._poisson(randomised)
        return max(before - self.mean(), 0.0)

    def _lower(self, amount: float) -> None:
        """Every level less *amount* cells (a deterministic cohort, taking tokens as a
        flow), empty at zero: the levels it empties hold none, so the shared fraction is
        scaled to keep the mean exact (else a flow just over the rate, emptying the bucket
        every step, would find the fraction there again each time: tokens made from
        nothing)."""
        carry = self.carry - amount
        whole = math.floor(carry)
        carry -= whole
        drop = -whole
        cells = self.cells
        if drop > self.top:
            cells[0] = 1.0
            cells[1:] = 0.0
            self.carry = 0.0
        elif drop:
            emptied = float(np.dot(cells[:drop], self.ones[:drop]))
            cells[0] = emptied + cells[drop]
            cells[1:self.top + 1 - drop] = cells[drop + 1:].copy()
            cells[self.top + 1 - drop:] = 0.0
            self.carry = carry * (1.0 - emptied)
        else:
            self.carry = carry

    def _poisson(self, mean: float) -> None:
        """A Poisson count of calls of mean *mean*, each taking a whole token while there
        is one: the distribution of the cells left (the count's law cut where its tail
        is below 1e-12: a few dozen cells for the calls of one step)."""
        size = min(self.top + 2, int(mean + 12.0 * math.sqrt(mean)) + 14)
        below = pdtr(self.calls[:size], mean)  # P(calls <= the edge of each cell)
        pmf = below.copy()
        pmf[1:] -= below[:-1]
        pmf[-1] += 1.0 - below[-1]  # more calls than that
        spread = np.convolve(self.cells[::-1], pmf)
        top = self.top
        self.cells = spread[top::-1].copy()  # level y: from level y + k, k calls
        self.cells[0] = np.dot(spread[top:], self.ones[:size])  # the levels emptied

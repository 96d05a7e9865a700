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

The rule is compiled functions over the cells and a few numbers (``meta``: the shared
fraction, the refill, the scale, the full cell), which the fluid model's compiled loop
calls; :class:`TokenLaw` holds them for Python.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

CELLS = 256  # cells of the tokens' distribution at most: a burst beyond it is coarsened
WORK_CELLS = 12_000  # its work a step in the work estimate's kernel cells (2 ns each):
# up to 23 µs a step measured in Python, at 256 cells and 1,000 calls a step
TINY = 1e-12
CARRY, FILL, SCALE, TOP = range(4)  # meta's numbers
EPS = 1e-15  # the incomplete gamma's series and fraction stop below this
RECURRENCE = 500.0  # below this mean (e^-mean well above underflow) the pmf by recurrence
NORMAL = 2.0e4  # above this shape the incomplete gamma is Wilson–Hilferty's normal


@njit(cache=True)
def poisson_cdf(k, mean):  # pragma: no cover - compiled
    """P(N ≤ k) for N Poisson of *mean*: the regularized upper incomplete gamma
    Q(k + 1, mean) (a series below the mode, a continued fraction above it; a
    normal by Wilson–Hilferty for a shape over NORMAL)."""
    a = math.floor(k) + 1.0
    if a <= 0.0:
        return 0.0
    if a > NORMAL:
        z = ((mean / a) ** (1.0 / 3.0) - (1.0 - 1.0 / (9.0 * a))) / math.sqrt(1.0 / (9.0 * a))
        return 0.5 * math.erfc(z / math.sqrt(2.0))
    front = math.exp(-mean + a * math.log(mean) - math.lgamma(a))
    if mean < a + 1.0:  # P(a, mean) by its series; Q = 1 - P
        term = total = 1.0 / a
        shape = a
        for _ in range(100_000):
            shape += 1.0
            term *= mean / shape
            total += term
            if abs(term) < abs(total) * EPS:
                break
        return max(1.0 - total * front, 0.0)
    b = mean + 1.0 - a  # Q(a, mean) by its continued fraction (modified Lentz)
    c = 1.0 / 1e-300
    d = 1.0 / b
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < EPS:
            break
    return min(h * front, 1.0)


@njit(cache=True)
def mean_tokens(cells, meta):  # pragma: no cover - compiled
    """Tokens banked on average."""
    total = 0.0
    for level in range(cells.size):
        total += cells[level] * level
    return (total + meta[CARRY]) * meta[SCALE]


@njit(cache=True)
def refill(cells, meta):  # pragma: no cover - compiled
    """One step's tokens; a full bucket keeps none beyond its burst."""
    top = int(meta[TOP])
    carry = meta[CARRY] + meta[FILL]
    whole = int(carry)
    meta[CARRY] = carry - whole
    if whole:
        if whole > top:
            cells[top] = 1.0
            cells[:top] = 0.0
        else:
            cells[top] = cells[top - whole:].sum()
            cells[whole:top] = cells[:top - whole].copy()
            cells[:whole] = 0.0
    if cells[top] > 1.0 - TINY:
        meta[CARRY] = 0.0  # full: nothing beyond the burst


@njit(cache=True)
def take(cells, meta, edges, total, randomised):  # pragma: no cover - compiled
    """Calls admitted (on average) of *total* arriving this step, *randomised* of them
    of random timing (a Poisson count) and the rest a deterministic cohort."""
    before = mean_tokens(cells, meta)
    cohort = max(total - randomised, 0.0) / meta[SCALE]
    if cohort > TINY:
        _lower(cells, meta, cohort)
    if randomised > TINY:
        _poisson(cells, meta, edges, randomised)
    return max(before - mean_tokens(cells, meta), 0.0)


@njit(cache=True)
def _lower(cells, meta, amount):  # pragma: no cover - compiled
    """Every level less *amount* cells (a deterministic cohort, taking tokens as a flow),
    empty at zero: the levels it empties hold none, so the shared fraction is scaled to
    keep the mean exact (else a flow just over the rate, emptying the bucket every step,
    would find the fraction there again each time: tokens made from nothing)."""
    top = int(meta[TOP])
    carry = meta[CARRY] - amount
    whole = math.floor(carry)
    carry -= whole
    drop = int(-whole)
    if drop > top:
        cells[0] = 1.0
        cells[1:] = 0.0
        meta[CARRY] = 0.0
    elif drop:
        emptied = cells[:drop].sum()
        cells[0] = emptied + cells[drop]
        cells[1:top + 1 - drop] = cells[drop + 1:].copy()
        cells[top + 1 - drop:] = 0.0
        meta[CARRY] = carry * (1.0 - emptied)
    else:
        meta[CARRY] = carry


@njit(cache=True)
def _poisson(cells, meta, edges, mean):  # pragma: no cover - compiled
    """A Poisson count of calls of mean *mean*, each taking a whole token while there is
    one: the distribution of the cells left (the count's law cut where its tail is below
    1e-12: a few dozen cells for the calls of one step)."""
    top = int(meta[TOP])
    size = min(top + 2, int(mean + 12.0 * math.sqrt(mean)) + 14)
    pmf = np.empty(size)
    below = 0.0
    if meta[SCALE] == 1.0 and mean < RECURRENCE:  # a cell a call: the pmf's recurrence
        term = math.exp(-mean)
        for c in range(size):
            pmf[c] = term
            below += term
            term *= mean / (c + 1)
    else:
        for c in range(size):  # P(calls in cell c): between its edge and the last one
            cdf = poisson_cdf(edges[c], mean)
            pmf[c] = cdf - below
            below = cdf
    pmf[size - 1] += 1.0 - below  # more calls than that
    spread = np.convolve(cells[::-1].copy(), pmf)
    for level in range(top + 1):  # level y: from level y + k, k calls
        cells[level] = spread[top - level]
    cells[0] = spread[top:top + size].sum()  # the levels emptied


class TokenLaw:
    """A token bucket of ``rate`` tokens per second and ``burst`` banked, stepped by
    ``dt``, starting full (as :class:`~herdsim.policies.rate_limit.TokenBucket`)."""

    def __init__(self, rate: float, burst: float, dt: float):
        scale = max(1.0, burst / CELLS)  # tokens per cell
        top = int(math.floor(burst / scale + 1e-9))  # the full bucket's cell
        self.cells = np.zeros(top + 1)
        self.cells[top] = 1.0
        self.meta = np.array([0.0, rate * dt / scale, scale, float(top)])
        self.edges = np.floor((np.arange(top + 2) + 0.5) * scale)  # the cells' edges

    def mean(self) -> float:
        """Tokens banked on average."""
        return float(mean_tokens(self.cells, self.meta))

    def refill(self) -> None:
        """One step's tokens; a full bucket keeps none beyond its burst."""
        refill(self.cells, self.meta)

    def take(self, total: float, randomised: float) -> float:
        """Calls admitted (on average) of *total* arriving this step, *randomised* of them
        of random timing (a Poisson count) and the rest a deterministic cohort."""
        return float(take(self.cells, self.meta, self.edges, total, randomised))

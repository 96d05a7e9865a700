"""The backoff strategy's base: small pure objects that know nothing of SimPy.

A strategy is built from ``base`` and ``cap`` (seconds) plus optional parameters, and
``sleep(attempt, prev, rng)`` returns the sleep before the next try. ``attempt`` is 0 for
the first retry (the brief's convention), ``prev`` is the job's previous sleep (``base``
before its first retry) and ``rng`` a :class:`numpy.random.Generator`.

A strategy whose memory is not its last sleep sets ``stateful = True``: its ``sleep``
then returns ``(sleep, state)`` and receives that state back as ``prev`` next time.

``min_sleep`` is a hint: ``0.0`` declares that the strategy may retry at once (a sleep of
exactly zero, as tenacity's default does), and a scenario in which that would freeze
simulated time is refused (see docs/model.md, "Zero-wait retries"). ``None`` (the
default) claims nothing; the built-ins never sleep exactly zero (full jitter's U(0, v)
is zero with probability 0).

Built-ins and library schedules with a closed form implement ``cdf(x, attempt, prev)``
(the distribution of one sleep, vectorised with numpy broadcasting); tests check the
draws against it and plots overlay it. ``decorrelated_jitter_v2`` has none (its sleep
depends on the previous draw), and ``decorrelated_jitter``'s is one given the previous
sleep only: neither has a distribution per retry alone, so neither has a ``fluid`` form.

Like a family's member (:mod:`herdsim.policies.family`), a strategy declares whether it
keeps the workers' fast path (``fast_path``: every one does, the sleep is drawn in either
loop), whether the testbed runs it for real (``emulated``: its workers draw from the same
object) and its ``fluid`` form: one sleep's distribution at retry ``n`` for a mean-field
model, or None when it has none (a sleep that depends on the previous one).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np


class ParamsError(ValueError):
    """A strategy exists but rejects the parameters it was given."""


class Strategy:
    """Base class of backoff strategies (subclass it, or just provide ``sleep``)."""

    name: ClassVar[str] = ""
    formula: ClassVar[str] = ""
    stateful: ClassVar[bool] = False
    min_sleep: ClassVar[float | None] = None
    fast_path: ClassVar[bool] = True
    emulated: ClassVar[bool] = True
    fluid: ClassVar[str | None] = None

    def __init__(self, base: float, cap: float):
        self.base = float(base)
        self.cap = float(cap)
        self._ceilings = [min(self.cap, self.base * 2.0**k) for k in range(64)]

    def ceiling(self, attempt: int) -> float:
        """``min(cap, base * 2**attempt)`` without overflow for huge attempts."""
        return self._ceilings[attempt] if attempt < 64 else self.cap

    def _ceiling_array(self, attempt: np.ndarray) -> np.ndarray:
        exponent = np.minimum(np.asarray(attempt, dtype=float), 1023.0)
        return np.minimum(self.cap, self.base * np.exp2(exponent))

    def sleep(self, attempt: int, prev: float, rng: np.random.Generator) -> float:
        raise NotImplementedError

    def sleep_pdf(self, attempt: int, step: float, steps: int) -> np.ndarray | None:
        """Its ``fluid`` form made real: the share of sleeps before retry *attempt* + 1
        that end in each of *steps* cells of width *step* (cell j holds the sleeps that
        round to j steps; what lies beyond the last cell is folded into it). None when it
        has no fluid form or no closed form (``cdf``) to read it from."""
        cdf = getattr(self, "cdf", None)
        if self.fluid is None or cdf is None or steps < 1:
            return None
        edges = (np.arange(steps + 1) - 0.5) * step
        # (differences of a cdf in floating point: never below 0, nor the fold of the rest)
        mass = np.maximum(np.diff(np.asarray(cdf(edges, attempt, self.base), dtype=float)),
                          0.0)
        mass[0] += float(cdf(np.asarray(edges[0]), attempt, self.base))
        mass[-1] = max(0.0, mass[-1] + 1.0 - float(mass.sum()))
        return mass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self.base:g}, cap={self.cap:g})"


def jitter_fraction(jitter: float) -> float:
    """A proportional jitter *j* (sleeps scaled by U(1 - j, 1 + j)), checked: in [0, 1)."""
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    return float(jitter)


def _uniform_cdf(x, lo, hi):
    """CDF of U(lo, hi), with a point mass where lo == hi."""
    width = np.where(hi > lo, hi - lo, 1.0)
    inside = np.clip((x - lo) / width, 0.0, 1.0)
    return np.where(hi > lo, inside, (x >= lo).astype(float))


class Ladder:
    """A schedule's intervals by attempt, ``v_0 = first``, ``v_(a+1) = step(v_a)``, kept as
    they are first asked for: the same arithmetic for a sleep (:meth:`at`) and for the
    distribution over many attempts (:meth:`many`). Growth stops where the step settles
    (``step(v) == v``: the cap); at most ``KEPT`` values are kept, and one further out
    (a multiplier barely above 1, a huge attempt) is walked to each time, as a loop
    would, without keeping it."""

    __slots__ = ("values", "step", "settled")
    KEPT = 1 << 16

    def __init__(self, first: float, step):
        self.values, self.step, self.settled = [first], step, False

    def at(self, attempt: int) -> float:
        """``v_attempt``."""
        values, step = self.values, self.step
        while attempt >= len(values) and not self.settled and len(values) < self.KEPT:
            nxt = step(values[-1])
            if nxt == values[-1]:
                self.settled = True
            else:
                values.append(nxt)
        if attempt < len(values) or self.settled:
            return values[min(attempt, len(values) - 1)]
        value = values[-1]
        for _ in range(attempt - len(values) + 1):
            nxt = step(value)
            if nxt == value:
                break
            value = nxt
        return value

    def many(self, attempt) -> np.ndarray:
        """``v`` at each of *attempt* (an integer array)."""
        attempt = np.asarray(attempt, dtype=np.int64)
        top = int(attempt.max()) if attempt.size else 0
        self.at(top)
        if self.settled or top < len(self.values):
            kept = np.asarray(self.values, dtype=float)
            return kept[np.minimum(attempt, kept.size - 1)]
        unique, where = np.unique(attempt, return_inverse=True)
        return np.array([self.at(int(a)) for a in unique], dtype=float)[where].reshape(
            attempt.shape)


def _atoms_at_most(x, count, atom, guess):
    """P(``atom(K)`` <= *x*) for K uniform on the whole numbers ``0 .. count - 1``:
    *atom* the sleep K gives, computed as the sampler computes it (monotone in K), and
    *guess* a whole number within one of the largest K with ``atom(K) <= x``, corrected
    here so that a sleep's own value counts at its atom."""
    return np.clip(_whole_at_most(x, atom, guess) + 1, 0, count) / count


def _whole_at_most(x, atom, guess):
    """The largest whole number K with ``atom(K) <= x``, from *guess* within one of it."""
    k = np.asarray(guess, dtype=float)
    return k + (atom(k + 1) <= x) - (atom(k) > x)


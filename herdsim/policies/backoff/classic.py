"""The textbook backoffs (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015; Polly;
gRPC): each draws one sleep from ``base``, ``cap`` and the attempt (the decorrelated ones
from the previous sleep too)."""

from __future__ import annotations

import math

import numpy as np

from herdsim.policies.backoff.base import Strategy, _uniform_cdf, jitter_fraction


class Fixed(Strategy):
    name = "fixed"
    fluid = "a delta at base"
    formula = "base"

    def sleep(self, attempt, prev, rng):
        return self.base

    def cdf(self, x, attempt, prev):
        return (np.asarray(x) >= self.base) * np.ones_like(np.asarray(attempt, dtype=float))


class Exponential(Strategy):
    name = "exponential"
    fluid = "a delta at min(cap, base·2^n)"
    formula = "min(cap, base * 2^attempt)"

    def sleep(self, attempt, prev, rng):
        return self._ceilings[attempt] if attempt < 64 else self.cap

    def cdf(self, x, attempt, prev):
        return (np.asarray(x) >= self._ceiling_array(attempt)).astype(float)


class FullJitter(Strategy):
    name = "full_jitter"
    fluid = "uniform on [0, min(cap, base·2^n)]"
    formula = "U(0, min(cap, base * 2^attempt))"

    def sleep(self, attempt, prev, rng):
        return (self._ceilings[attempt] if attempt < 64 else self.cap) * rng.random()

    def cdf(self, x, attempt, prev):
        return _uniform_cdf(np.asarray(x), 0.0, self._ceiling_array(attempt))


class EqualJitter(Strategy):
    name = "equal_jitter"
    fluid = "uniform on [v/2, v], v = min(cap, base·2^n)"
    formula = "v/2 + U(0, v/2),  v = min(cap, base * 2^attempt)"

    def sleep(self, attempt, prev, rng):
        half = 0.5 * (self._ceilings[attempt] if attempt < 64 else self.cap)
        return half + half * rng.random()

    def cdf(self, x, attempt, prev):
        v = self._ceiling_array(attempt)
        return _uniform_cdf(np.asarray(x), v / 2, v)


class DecorrelatedJitter(Strategy):
    name = "decorrelated_jitter"
    formula = "min(cap, U(base, 3 * prev)),  prev starts at base"

    def sleep(self, attempt, prev, rng):
        high = 3.0 * prev
        if high <= self.base:
            return min(self.cap, self.base)
        return min(self.cap, self.base + (high - self.base) * rng.random())

    def cdf(self, x, attempt, prev):
        x = np.asarray(x)
        high = np.maximum(3.0 * np.asarray(prev, dtype=float), self.base)
        below_cap = _uniform_cdf(x, self.base, high)
        return np.where(x >= self.cap, 1.0, below_cap)


class DecorrelatedJitterV2(Strategy):
    """Polly's ``DecorrelatedJitterBackoffV2`` (George Polevoy's formula), capped.

    With ``t = attempt + U(0, 1)`` and ``f(t) = 2^t * tanh(sqrt(4 t))`` the sleep is
    ``min(cap, (f(t) - f(t_prev)) * base / 1.4)``; ``base`` is the median first delay.
    The state carried between retries is ``f(t_prev)`` (0 before the first retry).
    """

    name = "decorrelated_jitter_v2"
    formula = "min(cap, (f(a+U) - f_prev) * base / 1.4),  f(t) = 2^t tanh(sqrt(4t))"
    stateful = True

    def sleep(self, attempt, prev, rng):
        if attempt == 0:
            prev = 0.0
        t = attempt + rng.random()
        if t >= 1000.0:  # 2^t overflows soon after: the cap, as Polly returns its maximum
            return self.cap, math.inf
        nxt = 2.0**t * math.tanh(math.sqrt(4.0 * t))
        return min(self.cap, (nxt - prev) * self.base / 1.4), nxt


class ProportionalJitter(Strategy):
    """gRPC-style proportional jitter: the exponential value scaled by U(1 - j, 1 + j)."""

    name = "proportional_jitter"
    fluid = "uniform on [v(1 - j), v(1 + j)], v = min(cap, base·2^n)"
    formula = "min(cap, base * 2^attempt) * U(1 - j, 1 + j),  j = 0.2"

    def __init__(self, base: float, cap: float, jitter: float = 0.2):
        super().__init__(base, cap)
        self.jitter = jitter_fraction(jitter)

    def sleep(self, attempt, prev, rng):
        v = self._ceilings[attempt] if attempt < 64 else self.cap
        return v * (1.0 - self.jitter + 2.0 * self.jitter * rng.random())

    def cdf(self, x, attempt, prev):
        v = self._ceiling_array(attempt)
        return _uniform_cdf(np.asarray(x), v * (1 - self.jitter), v * (1 + self.jitter))

"""Backoff strategies: small pure objects that know nothing of SimPy.

A strategy is built from ``base`` and ``cap`` (seconds) plus optional parameters, and
``sleep(attempt, prev, rng)`` returns the sleep before the next try. ``attempt`` is 0 for
the first retry (the seed's convention), ``prev`` is the job's previous sleep (``base``
before its first retry) and ``rng`` a :class:`numpy.random.Generator`.

A strategy whose memory is not its last sleep sets ``stateful = True``: its ``sleep``
then returns ``(sleep, state)`` and receives that state back as ``prev`` next time.

``min_sleep`` is a hint: ``0.0`` declares that the strategy may retry at once (a sleep of
exactly zero, as tenacity's default does), and a scenario in which that would freeze
simulated time is refused (see docs/model.md, "Zero-wait retries"). ``None`` (the
default) claims nothing; the built-ins never sleep exactly zero (full jitter's U(0, v)
is zero with probability 0).

Built-ins with a closed form implement ``cdf(x, attempt, prev)`` (the distribution of one
sleep, vectorised with numpy broadcasting); tests check the draws against it and plots
overlay it. ``decorrelated_jitter_v2`` has none (its sleep depends on the previous draw).
"""

from __future__ import annotations

import importlib
import math
from importlib.metadata import entry_points
from typing import ClassVar

import numpy as np

ENTRY_POINT_GROUP = "herdsim.strategies"


class ParamsError(ValueError):
    """A strategy exists but rejects the parameters it was given."""


class Strategy:
    """Base class of backoff strategies (subclass it, or just provide ``sleep``)."""

    name: ClassVar[str] = ""
    formula: ClassVar[str] = ""
    stateful: ClassVar[bool] = False
    min_sleep: ClassVar[float | None] = None

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self.base:g}, cap={self.cap:g})"


def _uniform_cdf(x, lo, hi):
    """CDF of U(lo, hi), with a point mass where lo == hi."""
    width = np.where(hi > lo, hi - lo, 1.0)
    inside = np.clip((x - lo) / width, 0.0, 1.0)
    return np.where(hi > lo, inside, (x >= lo).astype(float))


class Fixed(Strategy):
    name = "fixed"
    formula = "base"

    def sleep(self, attempt, prev, rng):
        return self.base

    def cdf(self, x, attempt, prev):
        return (np.asarray(x) >= self.base) * np.ones_like(np.asarray(attempt, dtype=float))


class Exponential(Strategy):
    name = "exponential"
    formula = "min(cap, base * 2^attempt)"

    def sleep(self, attempt, prev, rng):
        return self._ceilings[attempt] if attempt < 64 else self.cap

    def cdf(self, x, attempt, prev):
        return (np.asarray(x) >= self._ceiling_array(attempt)).astype(float)


class FullJitter(Strategy):
    name = "full_jitter"
    formula = "U(0, min(cap, base * 2^attempt))"

    def sleep(self, attempt, prev, rng):
        return (self._ceilings[attempt] if attempt < 64 else self.cap) * rng.random()

    def cdf(self, x, attempt, prev):
        return _uniform_cdf(np.asarray(x), 0.0, self._ceiling_array(attempt))


class EqualJitter(Strategy):
    name = "equal_jitter"
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
    formula = "min(cap, base * 2^attempt) * U(1 - j, 1 + j),  j = 0.2"

    def __init__(self, base: float, cap: float, jitter: float = 0.2):
        super().__init__(base, cap)
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {jitter}")
        self.jitter = float(jitter)

    def sleep(self, attempt, prev, rng):
        v = self._ceilings[attempt] if attempt < 64 else self.cap
        return v * (1.0 - self.jitter + 2.0 * self.jitter * rng.random())

    def cdf(self, x, attempt, prev):
        v = self._ceiling_array(attempt)
        return _uniform_cdf(np.asarray(x), v * (1 - self.jitter), v * (1 + self.jitter))


BUILT_IN: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        Fixed,
        Exponential,
        FullJitter,
        EqualJitter,
        DecorrelatedJitter,
        DecorrelatedJitterV2,
        ProportionalJitter,
    )
}


def installed() -> dict[str, object]:
    """Strategies registered by other packages under the ``herdsim.strategies`` entry points."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> dict[str, str]:
    """Every strategy name a scenario may use, with its formula (or origin)."""
    names = {name: cls.formula for name, cls in BUILT_IN.items()}
    for name, ep in installed().items():
        names.setdefault(name, f"installed: {ep.value}")
    return names


def resolve(name: str) -> type:
    """The strategy class for a built-in name, an entry-point name or ``module:Class``.

    Raises ``ValueError`` with the known names when *name* is none of these.
    """
    if name in BUILT_IN:
        return BUILT_IN[name]
    eps = installed()
    if name in eps:
        return eps[name].load()
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"cannot import {module_name!r}: {exc}") from None
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no {attr!r}") from None
    known = ", ".join(sorted(available()))
    raise ValueError(f"unknown strategy {name!r}; known: {known} (or module.path:Class)")


def build(name: str, base: float, cap: float, params: dict | None = None) -> Strategy:
    """Instantiate strategy *name*; raise ``ValueError`` on an unknown name or parameter."""
    cls = resolve(name)
    try:
        strategy = cls(base, cap, **(params or {}))
    except (TypeError, ValueError) as exc:
        raise ParamsError(f"strategy {name!r} rejects its params: {exc}") from None
    if not callable(getattr(strategy, "sleep", None)):
        raise ValueError(f"strategy {name!r} has no sleep(attempt, prev, rng) method")
    return strategy

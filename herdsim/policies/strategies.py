"""Backoff strategies: small pure objects that know nothing of SimPy.

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

Built-ins with a closed form implement ``cdf(x, attempt, prev)`` (the distribution of one
sleep, vectorised with numpy broadcasting); tests check the draws against it and plots
overlay it. ``decorrelated_jitter_v2`` has none (its sleep depends on the previous draw).
"""

from __future__ import annotations

import importlib
import math
import numbers
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from herdsim.errors import StrategyError
from herdsim.policies import adapters

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

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


# -- the libraries' own schedules (used by the presets, herdsim/policies/presets.py) ------
# Each docstring names the source line it follows; docs/policies.md cites the commit read.


class Immediate(Strategy):
    """No wait at all (tenacity's ``wait_none``, Finagle's requeues, spring-kafka's
    ``FixedBackOff(0, 9)``). ``base`` and ``cap`` are not used. Such a policy needs
    ``workers.attempt_overhead`` so that retrying cannot freeze simulated time."""

    name = "immediate"
    min_sleep = 0.0
    formula = "0"

    def sleep(self, attempt, prev, rng):
        return 0.0


class Sidekiq(Strategy):
    """Sidekiq's default delay (``lib/sidekiq/job_retry.rb``): ``count**4 + 15`` seconds
    plus ``rand(10 * (count + 1))``, a whole number in ``[0, 10 (count + 1))``; ``count`` is
    the retry count from 0 (= ``attempt``). ``base`` is the constant 15; ``cap`` bounds the
    total (Sidekiq has none)."""

    name = "sidekiq"
    formula = "min(cap, a^4 + base + randint[0, 10(a+1))),  base = 15 s"

    def sleep(self, attempt, prev, rng):
        jitter = int(rng.integers(0, 10 * (attempt + 1)))
        return min(self.cap, float(attempt**4) + self.base + jitter)


class Celery(Strategy):
    """Celery's ``get_exponential_backoff_interval`` (``celery/utils/time.py``) as
    ``autoretry_for`` calls it: ``randrange(min(maximum, factor * 2**retries) + 1)`` whole
    seconds, ``factor = int(max(1, retry_backoff))`` (``base``), ``maximum =
    retry_backoff_max`` (``cap``, 600 s); ``jitter: false`` is ``retry_jitter=False``."""

    name = "celery"
    min_sleep = 0.0
    formula = "randint[0, min(cap, base * 2^a)] whole seconds"

    def __init__(self, base: float, cap: float, jitter: bool = True):
        super().__init__(base, cap)
        self.factor = int(max(1.0, self.base))
        self.maximum = int(self.cap)
        self.jitter = bool(jitter)

    def sleep(self, attempt, prev, rng):
        countdown = min(self.maximum, self.factor * 2**attempt)
        if self.jitter:
            countdown = int(rng.integers(0, countdown + 1))
        return float(max(0, countdown))


class Envoy(Strategy):
    """Envoy's ``JitteredExponentialBackOffStrategy::nextBackOffMs``: ``random() %
    interval`` whole milliseconds; the interval starts at ``base`` and doubles while it is
    below ``cap / 2`` (``doubling_limit_``), then stays at ``cap``."""

    name = "envoy"
    min_sleep = 0.0
    formula = "randint[0, i_a) ms,  i_0 = base, i_(a+1) = 2 i_a if i_a < cap/2 else cap"

    def __init__(self, base: float, cap: float):
        super().__init__(base, cap)
        self.base_ms = max(1, round(self.base * 1000))
        self.max_ms = max(self.base_ms, round(self.cap * 1000))

    def interval_ms(self, attempt: int) -> int:
        interval, limit = self.base_ms, self.max_ms // 2
        for _ in range(attempt):
            if interval >= limit:
                return self.max_ms
            interval *= 2
        return interval

    def sleep(self, attempt, prev, rng):
        return int(rng.integers(0, self.interval_ms(attempt))) / 1000.0


class GrpcConnect(Strategy):
    """gRPC's connection backoff (grpc-go ``internal/backoff/backoff.go``): the first
    retry waits exactly ``base``; retry ``a`` waits ``min(base * multiplier^a, cap)``
    scaled by ``1 + jitter * U(-1, 1)``."""

    name = "grpc_connect"
    formula = "a = 0: base;  else min(cap, base * m^a) * U(1 - j, 1 + j),  m = 1.6, j = 0.2"

    def __init__(self, base: float, cap: float, multiplier: float = 1.6, jitter: float = 0.2):
        super().__init__(base, cap)
        if multiplier < 1.0 or not 0.0 <= jitter < 1.0:
            raise ValueError("multiplier must be >= 1 and jitter in [0, 1)")
        self.multiplier = float(multiplier)
        self.jitter = float(jitter)

    def sleep(self, attempt, prev, rng):
        if attempt == 0:
            return self.base
        backoff, retries = self.base, attempt
        while backoff < self.cap and retries > 0:
            backoff *= self.multiplier
            retries -= 1
        backoff = min(backoff, self.cap)
        return max(0.0, backoff * (1.0 + self.jitter * (rng.random() * 2.0 - 1.0)))


class Cenkalti(Strategy):
    """cenkalti/backoff v4 ``ExponentialBackOff.NextBackOff``: interval ``I_0 = base``,
    ``I_(a+1) = cap`` once ``I_a >= cap / multiplier``, else ``I_a * multiplier``; the sleep
    is ``I_a - d + U * (2 d + 1 ns)``, ``d = randomization * I_a``."""

    name = "cenkalti"
    formula = "I_a * U(1 - r, 1 + r),  I_0 = base, I_(a+1) = min(cap, 1.5 I_a), r = 0.5"

    def __init__(self, base: float, cap: float, multiplier: float = 1.5,
                 randomization: float = 0.5):
        super().__init__(base, cap)
        if multiplier <= 1.0 or not 0.0 <= randomization < 1.0:
            raise ValueError("multiplier must be > 1 and randomization in [0, 1)")
        self.multiplier = float(multiplier)
        self.randomization = float(randomization)

    def interval(self, attempt: int) -> float:
        current = self.base
        for _ in range(attempt):
            if current >= self.cap / self.multiplier:
                return self.cap
            current *= self.multiplier
        return current

    def sleep(self, attempt, prev, rng):
        current = self.interval(attempt)
        delta = self.randomization * current
        return current - delta + rng.random() * (2.0 * delta + 1e-9)


class Kafka(Strategy):
    """Kafka's ``ExponentialBackoff.backoff(attempts)`` (``common/utils/ExponentialBackoff
    .java``) with ``attempts = a``: ``term = base * 2^min(a, expMax)``, ``expMax =
    log2(cap / base)``; the sleep is ``min(cap, floor(term * U(1 - j, 1 + j)))`` ms."""

    name = "kafka"
    formula = "min(cap, base * 2^min(a, log2(cap/base)) * U(0.8, 1.2)), whole ms"

    def __init__(self, base: float, cap: float, jitter: float = 0.2):
        super().__init__(base, cap)
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {jitter}")
        self.jitter = float(jitter)
        self.base_ms = self.base * 1000.0
        self.max_ms = self.cap * 1000.0
        self.exp_max = (math.log(self.max_ms / max(self.base_ms, 1.0)) / math.log(2)
                        if self.max_ms > self.base_ms else 0.0)

    def sleep(self, attempt, prev, rng):
        if self.exp_max == 0.0:
            return self.base
        term = self.base_ms * 2.0 ** min(attempt, self.exp_max)
        factor = 1.0 - self.jitter + 2.0 * self.jitter * rng.random()
        return min(math.floor(factor * term), self.max_ms) / 1000.0


LIBRARY: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (Immediate, Sidekiq, Celery, Envoy, GrpcConnect, Cenkalti, Kafka)
}


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


def installed() -> dict[str, EntryPoint]:
    """Strategies registered by other packages under the ``herdsim.strategies`` entry points."""
    from importlib.metadata import entry_points  # only when a name is not built in

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> dict[str, str]:
    """Every strategy name a scenario may use, with its formula (or origin)."""
    names = {name: cls.formula for name, cls in {**BUILT_IN, **LIBRARY}.items()}
    for name, ep in installed().items():
        names.setdefault(name, f"installed: {ep.value}")
    return names


def resolve(name: str) -> type:
    """The strategy class for a built-in or library name, an entry-point name or
    ``module:Class`` (which may also name a tenacity wait or a backoff wait generator, see
    :mod:`herdsim.policies.adapters`).

    Raises ``ValueError`` with the known names when *name* is none of these.
    """
    if name in BUILT_IN:
        return BUILT_IN[name]
    if name in LIBRARY:
        return LIBRARY[name]
    eps = installed()
    if name in eps:
        return eps[name].load()
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"cannot import {module_name!r}: {exc}") from None
        except (Exception, SystemExit) as exc:  # the module's own code failed importing
            raise ValueError(f"importing {module_name!r} raised "
                             f"{type(exc).__name__}: {_short(exc)}") from None
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no {attr!r}") from None
    raise ValueError(unknown(name))


def unknown(name: str) -> str:
    """The message for a strategy name that is nothing known."""
    known = ", ".join(sorted(available()))
    return f"unknown strategy {name!r}; known: {known} (or module.path:Class)"


def is_own(name: str) -> bool:
    """True when *name* is one of herdsim's own strategies: resolving it runs no other
    package's code (an entry point's name or ``module:Class`` would)."""
    return name in BUILT_IN or name in LIBRARY


def is_import_path(name: str) -> bool:
    """True when *name* is ``module:Class`` (code to import), not a built-in or entry point."""
    return ":" in name and name not in BUILT_IN


def _short(value: Any, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Checked:
    """A user's strategy behind a check of every sleep where it is drawn.

    ``sleep`` must return a finite real number >= 0 (``(sleep, state)`` for a stateful
    strategy) and must not raise; anything else is a :class:`StrategyError` naming the
    strategy, the attempt and the value. Built-in strategies are not wrapped.
    """

    def __init__(self, name: str, inner: Any):
        self.name = name
        self.inner = inner
        self.stateful = bool(getattr(inner, "stateful", False))

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "inner":  # not set yet (unpickling): no recursion
            raise AttributeError(attribute)
        return getattr(self.inner, attribute)

    def sleep(self, attempt: int, prev: Any, rng: np.random.Generator) -> Any:
        try:
            drawn = self.inner.sleep(attempt, prev, rng)
        except (Exception, SystemExit) as exc:  # sys.exit() in a strategy ends no run
            raise StrategyError(f"strategy {self.name!r}: sleep(attempt={attempt}) raised "
                                f"{type(exc).__name__}: {_short(exc)}") from None
        if self.stateful:
            if not (isinstance(drawn, tuple) and len(drawn) == 2):
                raise StrategyError(f"strategy {self.name!r} is stateful: sleep(attempt="
                                    f"{attempt}) must return (sleep, state), got "
                                    f"{_short(repr(drawn))}")
            return self._check(attempt, drawn[0]), drawn[1]
        return self._check(attempt, drawn)

    def _check(self, attempt: int, value: Any) -> float:
        if isinstance(value, numbers.Real) and not isinstance(value, bool) \
                and math.isfinite(value) and value >= 0:  # type: ignore[operator]  # a Real
            return float(value)
        raise StrategyError(f"strategy {self.name!r}: sleep(attempt={attempt}) returned "
                            f"{_short(repr(value))}; a sleep must be a finite number of "
                            "seconds >= 0")

    def __repr__(self) -> str:
        return f"Checked({self.inner!r})"


def _bare(cls: object) -> bool:
    """A class that only provides ``sleep``: no ``__init__`` of its own to take base, cap."""
    return isinstance(cls, type) and cls.__init__ is object.__init__  # type: ignore[misc]


def build(name: str, base: float, cap: float, params: dict | None = None) -> Strategy:
    """Instantiate strategy *name*; raise ``ValueError`` on an unknown name or parameter.

    A strategy that is not built in comes wrapped in :class:`Checked`; an exception in
    its ``__init__`` is a :class:`StrategyError`.
    """
    cls = resolve(name)
    try:
        strategy = (cls() if _bare(cls) and not params  # "just provide sleep"
                    else cls(base, cap, **(params or {})) if isinstance(cls, type)
                    else adapters.wrap(cls, base, cap, params or {}) or cls(base, cap,
                                                                           **(params or {})))
    except (TypeError, ValueError) as exc:
        raise ParamsError(f"strategy {name!r} rejects its params: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise StrategyError(f"strategy {name!r}: __init__ raised "
                            f"{type(exc).__name__}: {_short(exc)}") from None
    if not callable(getattr(strategy, "sleep", None)):
        raise ValueError(f"strategy {name!r} has no sleep(attempt, prev, rng) method")
    if name in BUILT_IN:
        return strategy
    return Checked(name, strategy)  # type: ignore[return-value]

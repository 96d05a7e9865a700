"""Where a strategy name leads: the built-ins and the libraries' schedules (:data:`FAMILY`,
the registry listing them with their declarations), installed entry points and user
strategies by import path, and :func:`build`, which checks a user's strategy's every sleep
(:class:`Checked`)."""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from herdsim.errors import StrategyError
from herdsim.policies import adapters
from herdsim.policies.backoff.base import ParamsError, Strategy
from herdsim.policies.backoff.classic import (
    DecorrelatedJitter,
    DecorrelatedJitterV2,
    EqualJitter,
    Exponential,
    Fixed,
    FullJitter,
    ProportionalJitter,
)
from herdsim.policies.backoff.libraries import (
    Celery,
    Cenkalti,
    Envoy,
    GrpcConnect,
    Immediate,
    Kafka,
    Sidekiq,
)

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "herdsim.strategies"


CLASSIC: tuple[type[Strategy], ...] = (Fixed, Exponential, FullJitter, EqualJitter,
                                       DecorrelatedJitter, DecorrelatedJitterV2,
                                       ProportionalJitter)
SCHEDULES: tuple[type[Strategy], ...] = (Immediate, Sidekiq, Celery, Envoy, GrpcConnect,
                                         Cenkalti, Kafka)


@dataclass(frozen=True)
class Registry:
    """herdsim's own strategies, listed as a family lists its members
    (:class:`herdsim.policies.family.Family`): names and declarations. Not a pydantic
    union: a scenario names one by ``retry.strategy`` (or an import path), and its
    ``params`` are the strategy's constructor arguments, checked when it is built."""

    name: str
    noun: str
    tag: str
    members: tuple[type[Strategy], ...]

    def names(self) -> list[str]:
        """The strategies' names, in listing order."""
        return [m.name for m in self.members]

    def member(self, name: str) -> type[Strategy]:
        """The strategy *name* chooses."""
        return next(m for m in self.members if m.name == name)

    def rows(self) -> Iterator[tuple[str, str, str, str, str]]:
        """``(strategy, formula, fast path, emulated, fluid form)`` for listings and docs."""
        for m in self.members:
            yield (m.name, m.formula, "yes" if m.fast_path else "no",
                   "yes" if m.emulated else "no", m.fluid or "none")


FAMILY = Registry("backoff strategy", "backoff strategy", "strategy", CLASSIC + SCHEDULES)
BUILT_IN: dict[str, type[Strategy]] = {cls.name: cls for cls in CLASSIC}
LIBRARY: dict[str, type[Strategy]] = {cls.name: cls for cls in SCHEDULES}


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

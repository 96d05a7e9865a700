"""Defences by criticality class (``workload.criticality`` with shedding, an admission
limit or CoDel; docs/policies.md, Priority classes): the lowest class is refused first.

Made by :func:`classed` from the defended downstream's class, once, when a run with
classes builds its workers' downstream (a run without classes never sees it). Each
arriving call's class is read from the job its caller holds; then

* **the admission limit** admits a call while the calls held are below the limit ×
  its class's factor (:meth:`~herdsim.policies.criticality.Mix.factors`: 1 for the lowest
  class present, 1 + ``step`` per class below for the others), so the lowest class is
  refused at the limit and each higher one only beyond it (Netflix's partitioned limiter
  lets a partition within its share past the global limit in the same way);
* **shedding** uses its member raised by the same factor (``above`` × factor);
* **CoDel**, when it would reject the call a freed slot picks (the oldest of the highest
  class waiting), rejects the newest waiting call of the lowest class below it instead
  (the one a full room pushes out: with the workers' one timeout, calls expire oldest
  first, so the newest is live and found at once) and serves the picked one; with no
  lower class waiting, the picked call, as without classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from herdsim.model.calls import ABANDONED, REJECTED, WAITING, Call
from herdsim.model.kernel import trigger_later
from herdsim.policies.criticality import CLASSES, DEFAULT

T = TypeVar("T")
_MADE: dict[type, type] = {}  # base -> the class made from it


def classed(base: type[T]) -> type[T]:
    """The defended downstream class *base* with its defences by class (one class per
    base, made once; its one base is *base*)."""
    made = _MADE.get(base)
    if made is None:
        made = _MADE[base] = _made(base)
        made.__name__ = made.__qualname__ = f"Classed{base.__name__}"
    return cast("type[T]", made)


def _made(base: type) -> type:

    class ClassedDefences(base):  # type: ignore[valid-type,misc]
        """*base* with its defences by class; :meth:`by_class` gives it the class of a
        caller and the factors."""

        _class_of: Callable[[Any], int] = staticmethod(lambda proc: DEFAULT)
        _factors: tuple[float, ...] = (1.0,) * len(CLASSES)
        _klass = DEFAULT  # the class of the call arriving now
        _sheddings: tuple = ()

        def by_class(self, class_of: Callable[[Any], int],
                     factors: tuple[float, ...]) -> None:
            """Read each caller's class with *class_of*; raise the thresholds by
            *factors* (highest class first)."""
            self._class_of = class_of
            self._factors = factors
            if self.shedding is not None:
                self._sheddings = tuple(self.shedding.raised(f) for f in factors)

        def admit(self, proc, timeout: float | None) -> int | Call:
            self._klass = self._class_of(proc)
            return super().admit(proc, timeout)

        def arrive(self, c: Call) -> int | None:
            self._klass = self._class_of(c.proc)
            return super().arrive(c)

        def _screen(self, now: float) -> int | None:
            """The admission limit's and then shedding's answer, by the arriving class."""
            klass = self._klass
            admission = self.admission
            if admission is not None and \
                    self.held >= admission.limit_at(now) * self._factors[klass]:
                self._shed_admission(now)
                return self._refuse(now, self._over_limit)
            if self._sheddings and self._sheddings[klass].sheds(self.in_room(), self._draw):
                self._shed_shedding(now)
                return self._refuse(now, REJECTED)
            return None

        def _codel_drops(self, c: Call, now: float, live: bool) -> bool:
            """CoDel's verdict on *c* falls on the lowest class waiting below it first."""
            if not self.codel.drops(now - c.admitted, now - self._standing_since):
                return False
            found = _newest_below(self._waiting, self._class_of(c.proc))
            if found is None:
                return super()._codel_drops(c, now, live)
            victim, k = found
            self._waiting.remove(victim, k)
            self.n_waiting -= 1
            self._shed_codel(now)
            self._left(victim, now, True)
            victim.state = ABANDONED  # its deadline, still armed, now does nothing
            victim.retry_after = self._hint(now) if self._hint is not None else None
            self.active.pop(victim, None)
            trigger_later(self.env, victim.event, REJECTED)
            return False  # the picked call is served

    return ClassedDefences


def _newest_below(room, mine: int) -> tuple[Call, int] | None:
    """The newest live waiting call of the lowest class below *mine*, with its class."""
    for k in range(len(CLASSES) - 1, mine, -1):
        for c in reversed(room.rooms[k]):
            if c.state == WAITING:
                return c, k
    return None

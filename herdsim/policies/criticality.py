"""Request criticality (Google SRE, "Handling Overload"): each job is CRITICAL_PLUS,
CRITICAL, SHEDDABLE_PLUS or SHEDDABLE, assigned by a member of the ``criticality`` family
(``kind: mix``, the default: drawn per job from the workload's shares); under overload the
waiting room, shedding, the admission limiters and CoDel drop the lowest class first
(docs/policies.md, Priority classes). Pure Python and numpy, no SimPy."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import FieldError

CLASSES = ("critical_plus", "critical", "sheddable_plus", "sheddable")  # highest first
DEFAULT = CLASSES.index("critical")  # a call with no job behind it (Google's default)
MAX_SHARE = 1e6  # a class's weight (their sum stays finite)
MAX_STEP = 100.0  # a class's raise of a defence's threshold, per class below it


class Mix(Member):
    """``kind: mix`` (the default): each job's class drawn from these shares (weights,
    normalised)."""

    kind: Literal["mix"] = "mix"
    critical_plus: float = Field(0.0, ge=0, le=MAX_SHARE,
                                 description="share of CRITICAL_PLUS jobs")
    critical: float = Field(0.0, ge=0, le=MAX_SHARE, description="share of CRITICAL jobs")
    sheddable_plus: float = Field(0.0, ge=0, le=MAX_SHARE,
                                  description="share of SHEDDABLE_PLUS jobs")
    sheddable: float = Field(0.0, ge=0, le=MAX_SHARE, description="share of SHEDDABLE jobs")
    step: float = Field(0.5, ge=0, le=MAX_STEP,
                        description="shedding and the admission limit refuse the lowest "
                                    "class present at their threshold, and each class above "
                                    "it from (1 + step × its rank) times it")
    about: ClassVar[str] = "each job's class drawn from the shares (Google SRE's " \
                           "criticality); the lowest class is dropped first"
    fast_path: ClassVar[bool] = False  # the workers note the job each one holds
    fluid: ClassVar[str | None] = None  # the mean-field model has one class of call

    @model_validator(mode="after")
    def _some(self) -> Mix:
        if not sum(self.shares()) > 0:
            raise FieldError("critical", "criticality needs a share above 0 for one class")
        return self

    def shares(self) -> list[float]:
        """Each class's weight, highest class first."""
        return [getattr(self, name) for name in CLASSES]

    def sampler(self, rng: np.random.Generator) -> Callable[[int], np.ndarray]:
        """``sample(n)``: *n* class numbers (0: critical_plus … 3: sheddable)."""
        p = np.asarray(self.shares()) / sum(self.shares())
        return lambda n: rng.choice(len(CLASSES), n, p=p)

    def factors(self) -> tuple[float, ...]:
        """Each class's raise of a defence's threshold (shedding's ``above``, the
        admission limit), highest class first: 1 + ``step`` × the number of classes
        present (share above 0) below it; the lowest class present gets 1, so one class
        alone is no change."""
        present = [share > 0 for share in self.shares()]
        return tuple(1.0 + self.step * sum(present[k + 1:]) for k in range(len(CLASSES)))


FAMILY = Family("criticality", "criticality", "kind", (Mix,), default="mix")
Criticality = FAMILY.union()


class ClassedRoom:
    """A waiting room by class: ``append`` files a call under its class
    (``class_of(call)``), ``popleft`` serves the oldest call of the highest class
    waiting, ``pop`` the newest of it; ``lowest(above)`` the newest call of the lowest
    class waiting below class *above* (numbers: higher is lower), or None."""

    __slots__ = ("rooms", "class_of", "size", "_last")

    def __init__(self, class_of: Callable[[Any], int]):
        self.rooms: list[deque[Any]] = [deque() for _ in CLASSES]
        self.class_of = class_of
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __getitem__(self, index: int) -> Any:  # only [-1]: the last call filed
        if index != -1 or not self.size:
            raise IndexError(index)
        return self._last

    def append(self, call: Any) -> None:
        self.rooms[self.class_of(call)].append(call)
        self._last = call
        self.size += 1

    def popleft(self) -> Any:
        for room in self.rooms:
            if room:
                self.size -= 1
                return room.popleft()
        raise IndexError("pop from an empty room")

    def pop(self) -> Any:
        for room in self.rooms:
            if room:
                self.size -= 1
                return room.pop()
        raise IndexError("pop from an empty room")

    def lowest(self, above: int) -> Any | None:
        for k in range(len(CLASSES) - 1, above, -1):
            if self.rooms[k]:
                return self.rooms[k][-1]
        return None

    def remove(self, call: Any, klass: int) -> None:
        self.rooms[klass].remove(call)
        self.size -= 1

    def clear(self) -> None:
        for room in self.rooms:
            room.clear()
        self.size = 0

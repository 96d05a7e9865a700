"""Request criticality (Google SRE, "Handling Overload"): each job is CRITICAL_PLUS,
CRITICAL, SHEDDABLE_PLUS or SHEDDABLE, drawn from the workload's mix; under overload the
waiting room drops the lowest class first. Pure Python and numpy, no SimPy."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from herdsim.policies.fields import FieldError

CLASSES = ("critical_plus", "critical", "sheddable_plus", "sheddable")  # highest first
MAX_SHARE = 1e6  # a class's weight (their sum stays finite)


class Mix(BaseModel):
    """``workload.criticality``: each class's share of the jobs (weights, normalised)."""

    model_config = ConfigDict(extra="forbid")

    critical_plus: float = Field(0.0, ge=0, le=MAX_SHARE,
                                 description="share of CRITICAL_PLUS jobs")
    critical: float = Field(0.0, ge=0, le=MAX_SHARE, description="share of CRITICAL jobs")
    sheddable_plus: float = Field(0.0, ge=0, le=MAX_SHARE,
                                  description="share of SHEDDABLE_PLUS jobs")
    sheddable: float = Field(0.0, ge=0, le=MAX_SHARE, description="share of SHEDDABLE jobs")

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

"""``metric: busy_fraction``: the HPA's utilisation formula, ``ceil(current ×
utilisation / target)`` workers, the target a fraction in (0, 1]."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import model_validator

from herdsim.policies.autoscale.base import Autoscale
from herdsim.policies.fields import FieldError


class BusyFraction(Autoscale):
    """``metric: busy_fraction`` (the HPA)."""

    metric: Literal["busy_fraction"]
    about: ClassVar[str] = "the HPA: ceil(workers × busy fraction / target) workers"
    fluid: ClassVar[str | None] = "workers → workers × busy fraction / target, every interval"

    @model_validator(mode="after")
    def _a_fraction(self) -> BusyFraction:
        if self.target > 1:
            raise FieldError("target", "busy_fraction: the target is a fraction in (0, 1]")
        return self

    def ratio(self, current: int, depth: int, busy: float) -> float:
        return current * busy / self.target

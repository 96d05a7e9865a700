"""Probabilistic shedding beyond a waiting-room depth (Metafor's throttling server): from
``above`` waiting calls, an arriving call is admitted with ``probability``. A one-member
family (``kind: probabilistic``, the default)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import Fraction


class Probabilistic(Member):
    """``kind: probabilistic`` (the default): admit with ``probability`` from ``above``
    waiting calls."""

    kind: Literal["probabilistic"] = "probabilistic"
    above: int = Field(ge=0, description="waiting calls from which arrivals are shed")
    probability: Fraction = Field(description="chance of admitting a call beyond that depth")
    about: ClassVar[str] = "from above waiting calls, admit each with probability " \
                           "(Metafor's throttling server)"
    fluid: ClassVar[str | None] = "arrival rate × probability once above calls wait"

    def sheds(self, depth: int, draw: Callable[[], float]) -> bool:
        """Whether an arriving call is shed, *depth* calls waiting (*draw*: a uniform
        number, drawn only beyond the depth)."""
        return depth >= self.above and draw() >= self.probability

    def raised(self, factor: float) -> Probabilistic:
        """The rule for a higher criticality class: shed only from ``above`` × *factor*
        waiting calls (rounded up; the same rule at factor 1)."""
        return self.model_copy(update={"above": math.ceil(self.above * factor)})


FAMILY = Family("shedding", "shedding", "kind", (Probabilistic,), default="probabilistic")
Shedding = FAMILY.union()

"""``mode: slow``: every service time drawn is ``factor`` times longer."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.outages.base import Outage, OutageState


class Slow(Outage):
    """``mode: slow``."""

    mode: Literal["slow"]
    factor: float = Field(5.0, gt=0, description="service-time multiplier")
    about: ClassVar[str] = "service times multiplied by factor"
    fluid: ClassVar[str | None] = "service rate divided by factor while it holds"

    def label(self) -> str:
        return f"slow ×{self.factor:g}"

    def begin(self, state: OutageState) -> None:
        state.slows.append(self.factor)

    def cease(self, state: OutageState) -> None:
        state.slows.remove(self.factor)

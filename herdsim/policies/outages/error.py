"""``mode: error``: a fraction ``error_rate`` of the calls served fail."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.outages.base import Outage, OutageState


class Error(Outage):
    """``mode: error``."""

    mode: Literal["error"]
    error_rate: float = Field(1.0, gt=0, le=1, description="fraction of served calls failing")
    about: ClassVar[str] = "served calls fail with probability error_rate"
    fluid: ClassVar[str | None] = "goodput × (1 − error_rate) while it holds"

    def label(self) -> str:
        return f"{self.error_rate:.0%} errors"

    def begin(self, state: OutageState) -> None:
        state.errors.append(self.error_rate)

    def cease(self, state: OutageState) -> None:
        state.errors.remove(self.error_rate)

"""``mode: down``: the downstream refuses every call, and every call in flight fails at
its start, together."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.outages.base import Outage, OutageState


class Down(Outage):
    """``mode: down`` (the default)."""

    mode: Literal["down"] = "down"
    about: ClassVar[str] = "every call refused at once; the calls in flight fail together"
    refuses: ClassVar[bool] = True
    fluid: ClassVar[str | None] = "service rate 0 while it holds; the work in flight lost"

    def begin(self, state: OutageState) -> None:
        state.down += 1

    def cease(self, state: OutageState) -> None:
        state.down -= 1

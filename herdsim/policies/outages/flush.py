"""``mode: flush``: the tier's cache is emptied at ``start`` and bypassed for
``duration`` (every request goes to the tier and nothing is stored); it refills from
then on. The tier itself serves as usual."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.outages.base import Outage, OutageState


class Flush(Outage):
    """``mode: flush`` (needs a ``cache`` on its tier: the scenario's check)."""

    mode: Literal["flush"]
    about: ClassVar[str] = "the tier's cache emptied at start and bypassed for duration"
    needs_cache: ClassVar[bool] = True
    emulated: ClassVar[bool] = False  # the testbed has no cache
    fluid: ClassVar[str | None] = "hit rate 0 at start, refilling at the tier's fill rate"

    def label(self) -> str:
        return "cache flush"

    def begin(self, state: OutageState) -> None:
        state.flushes += 1
        state.flushing += 1

    def cease(self, state: OutageState) -> None:
        state.flushing -= 1

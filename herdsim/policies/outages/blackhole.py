"""``mode: blackhole``: calls go unanswered until the client's timeout."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.outages.base import Outage, OutageState


class Blackhole(Outage):
    """``mode: blackhole`` (needs a client timeout: the scenario's check)."""

    mode: Literal["blackhole"]
    about: ClassVar[str] = "no answer: every call waits out the client's timeout"
    needs_timeout: ClassVar[bool] = True
    fluid: ClassVar[str | None] = "service rate 0 while it holds; each call held for the timeout"

    def begin(self, state: OutageState) -> None:
        state.blackhole += 1

    def cease(self, state: OutageState) -> None:
        state.blackhole -= 1

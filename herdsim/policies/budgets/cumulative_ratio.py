"""The cumulative-ratio retry breaker of the original retry simulator
(mbrooker/simulator_example ``retry_sim``, CircuitBreakerRetryStrategy): it counts first
tries and failed calls (retries included) since the start; a failure is counted first,
then retried only while failures / first tries <= ``ratio``. No window, no states."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.budgets.base import Budget


class CumulativeRatio:
    """Retries allowed while failed calls / first tries, both counted since the start,
    is at most ``ratio``."""

    gates_calls = True  # first tries are counted when they are made

    def __init__(self, ratio: float):
        self.ratio = ratio
        self.first_tries = 0
        self.failures = 0

    def allow_call(self, now: float, first: bool = False) -> bool:
        if first:
            self.first_tries += 1
        return True

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        return self.failures / self.first_tries <= self.ratio, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        if not ok:
            self.failures += 1


class Cumulative(Budget):
    """``kind: cumulative_ratio``: the original retry simulator's retry breaker."""

    kind: Literal["cumulative_ratio"]
    ratio: float = Field(0.1, gt=0, le=1, description="failures per first try, since the "
                                                      "start, above which retries stop")
    about: ClassVar[str] = "retries stop while failures exceed ratio × first tries, " \
                           "counted since the start"
    fluid: ClassVar[str | None] = "retries off once failures / first tries > ratio"

    def build(self, draw: Callable[[], float]) -> CumulativeRatio:
        """The breaker (*draw*: uniform numbers, unused)."""
        return CumulativeRatio(self.ratio)

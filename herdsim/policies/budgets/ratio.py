"""Finagle's ``RetryBudget``: retries within the window may not exceed ``ratio`` × first
tries + ``min_per_second`` × window."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from herdsim.policies.budgets.base import Budget
from herdsim.policies.fields import Period
from herdsim.policies.windows import TimeWindow

if TYPE_CHECKING:  # the fluid gates import numba: only predict builds one
    from herdsim.policies.budgets.fluid import RatioGate


class RatioBudget:
    """Retries limited to ``ratio`` of first tries (plus a floor) over a sliding window."""

    gates_calls = False

    def __init__(self, window: float, ratio: float, min_per_second: float):
        self.ratio = ratio
        self.reserve = min_per_second * window
        self.window = TimeWindow(window, 2)  # (first tries, retries)

    def allow_call(self, now: float, first: bool = False) -> bool:
        return True

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        first, retries = self.window.advance(now)
        if retries + 1 <= self.ratio * first + self.reserve:
            self.window.record(now, (0, 1))
            return True, 1.0
        return False, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        if not paid:
            self.window.record(now, (1, 0))


class Ratio(Budget):
    """``kind: ratio``: Finagle's RetryBudget."""

    kind: Literal["ratio"]
    window: Period = Field(10.0, description="the sliding window of first tries and retries")
    ratio: float = Field(0.2, gt=0, le=1, description="retries per first try")
    min_per_second: float = Field(10.0, ge=0, description="retries always allowed")
    about: ClassVar[str] = "retries at most ratio × first tries plus a floor, over a " \
                           "window (Finagle RetryBudget)"
    fluid: ClassVar[str | None] = "retry rate ≤ ratio × first-try rate + min_per_second"

    def fluid_gate(self, dt: float) -> RatioGate | None:
        """Its retry-rate limit on a fluid, for a pool-wide budget."""
        if self.scope != "pool":
            return None
        from herdsim.policies.budgets.fluid import RatioGate, window_steps  # (numba: predict)

        return RatioGate(window_steps(self.window, dt), self.ratio,
                         self.min_per_second * self.window)

    def build(self, draw: Callable[[], float]) -> RatioBudget:
        """The budget (*draw*: uniform numbers, unused)."""
        return RatioBudget(self.window, self.ratio, self.min_per_second)

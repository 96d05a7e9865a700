"""Google SRE client-side throttling ("Handling Overload"): every call is refused locally
with probability ``max(0, (requests - k * accepts) / (requests + 1))`` over a sliding
window."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.budgets.base import Budget
from herdsim.policies.fields import Period
from herdsim.policies.windows import TimeWindow


class AdaptiveThrottle:
    """Google SRE client-side throttling over a sliding window of requests and accepts."""

    gates_calls = True

    def __init__(self, window: float, k: float, draw: Callable[[], float]):
        self.k = k
        self.window = TimeWindow(window, 2)  # (requests, accepts)
        self._draw = draw

    def rejection_probability(self, now: float) -> float:
        """The chance a call made at *now* is refused locally."""
        requests, accepts = self.window.advance(now)
        return max(0.0, (requests - self.k * accepts) / (requests + 1))

    def allow_call(self, now: float, first: bool = False) -> bool:
        p = self.rejection_probability(now)
        allowed = p == 0.0 or self._draw() >= p
        if not allowed:
            self.window.record(now, (1, 0))  # a locally refused request still counts
        return allowed

    def allow_retry(self, now: float, timed_out: bool,
                    throttled: bool = False) -> tuple[bool, float]:
        return True, 0.0

    def on_result(self, now: float, ok: bool, paid: float) -> None:
        self.window.record(now, (1, 1 if ok else 0))


class Adaptive(Budget):
    """``kind: adaptive``: Google SRE client-side throttling."""

    kind: Literal["adaptive"]
    window: Period = Field(120.0, description="the sliding window of requests and accepts")
    k: float = Field(2.0, gt=0, description="accepts multiplier K")
    about: ClassVar[str] = "calls refused locally as requests outgrow K × accepts (Google " \
                           "SRE client-side throttling)"
    fluid: ClassVar[str | None] = "calls sent at most K × the accepted rate"

    def build(self, draw: Callable[[], float]) -> AdaptiveThrottle:
        """The throttle (*draw*: uniform numbers, its refusals)."""
        return AdaptiveThrottle(self.window, self.k, draw)

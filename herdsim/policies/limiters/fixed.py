"""A fixed limit: Netflix concurrency-limits' ``FixedLimit``, a semaphore of ``limit``."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.limiters.base import Admission


class FixedLimit:
    """Admit at most ``limit`` calls at once; samples change nothing."""

    def __init__(self, limit: int = 20):
        self.limit = limit

    def limit_at(self, now: float) -> int:
        return self.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        """A fixed limit learns nothing."""


class Fixed(Admission):
    """``kind: fixed``: a semaphore of ``limit`` calls."""

    kind: Literal["fixed"]
    limit: int = Field(ge=1, description="calls admitted at once")
    about: ClassVar[str] = "a semaphore: at most limit calls admitted (Netflix FixedLimit)"
    emulated: ClassVar[bool] = False  # the emulator has no admission limit
    fluid: ClassVar[str | None] = "a cap on calls in service plus waiting"

    def build(self, draw: Callable[[], float]) -> FixedLimit:
        """The limiter (*draw*: uniform numbers, unused)."""
        return FixedLimit(self.limit)

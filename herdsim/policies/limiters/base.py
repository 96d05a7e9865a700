"""What the downstream and :class:`~herdsim.policies.limiters.window.WindowedLimit` read of a
limiter (structural types: the limiters do not inherit them)."""

from __future__ import annotations

from typing import ClassVar, Literal, Protocol

from pydantic import Field, model_validator

from herdsim.policies.family import Member
from herdsim.policies.fields import FieldError


class Limiter(Protocol):
    """An admission limit, as the downstream reads it."""

    def limit_at(self, now: float) -> int:
        """The limit on calls admitted (in service plus waiting) at *now*."""
        ...

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        """A call admitted at *start*, with *inflight* admitted then, left at *now*."""
        ...


class Limit(Limiter, Protocol):
    """Netflix concurrency-limits' ``Limit``: updated by one sample (an rtt) at a time."""

    limit: int

    def on_sample(self, start: float, rtt: float, inflight: int, dropped: bool) -> None:
        """``Limit.onSample``."""
        ...


class Admission(Member):
    """An admission limiter's config: the answer to a call over the limit, and its kind's
    own fields (left out: the library's default)."""

    status: Literal[503, 429] = Field(503, description="the answer to a call over the limit")
    fast_path: ClassVar[bool] = True  # the server's, not the workers' loop
    emulated: ClassVar[bool] = False

    def given(self) -> dict:
        """Its own fields that were set (the rest take the library's defaults)."""
        return {name: getattr(self, name) for name in type(self).model_fields
                if name not in ("kind", "status", "windowed")
                and getattr(self, name) is not None}


class Ordered(Admission):
    """A limiter with a floor and a ceiling: the floor is not above the ceiling."""

    defaults: ClassVar[tuple[int, int]]  # the library's (min_limit, max_limit)

    @model_validator(mode="after")
    def _floor_below_ceiling(self) -> Ordered:
        low = getattr(self, "min_limit", None)
        high = getattr(self, "max_limit", None)
        low = self.defaults[0] if low is None else low
        high = self.defaults[1] if high is None else high
        if low > high:
            raise FieldError("min_limit", f"min_limit ({low}) is above max_limit ({high})")
        return self

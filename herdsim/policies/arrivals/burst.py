"""``arrivals: burst``: ``burst_size`` jobs at once, every burst_size/rate seconds."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.arrivals.base import Source

BURST_SIZE = 100  # jobs per burst when burst_size is left out


class Burst(Source):
    """``arrivals: burst``."""

    arrivals: Literal["burst"]
    burst_size: int | None = Field(None, ge=1, description=f"jobs per burst (default "
                                                           f"{BURST_SIZE})")
    about: ClassVar[str] = "burst_size jobs at once, burst_size/rate seconds apart"
    fluid: ClassVar[str | None] = "arrival rate λ(t) (bursts averaged out)"

    def jobs_per_arrival(self) -> int:
        return BURST_SIZE if self.burst_size is None else self.burst_size

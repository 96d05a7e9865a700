"""What every autoscaler has (bounds, pace, cooldown) whatever metric it follows."""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from pydantic import Field, model_validator

from herdsim.policies.family import Member
from herdsim.policies.fields import MAX_WORKERS, FieldError, NonNegativeDuration, Period


class Autoscale(Member):
    """Workers added and removed between ``min`` and ``max`` every ``interval``; the
    metric (the member) says how many it wishes for."""

    target: float = Field(gt=0, description="queue_depth: jobs queued per worker; "
                                            "busy_fraction: the busy fraction aimed at")
    min: int = Field(1, ge=1, le=MAX_WORKERS)
    max: int = Field(ge=1, le=MAX_WORKERS)
    interval: Period = Field(15.0, description="how often the autoscaler decides")
    step_limit: int | None = Field(None, ge=1, le=MAX_WORKERS,
                                   description="workers added or removed per decision at "
                                               "most")
    cooldown: NonNegativeDuration = Field(
        0.0, description="no scale-in until this long after the last scaling")
    fast_path: ClassVar[bool] = False  # workers.autoscale gates the workers' calls
    emulated: ClassVar[bool] = False  # the testbed runs a fixed pool

    @model_validator(mode="after")
    def _ordered(self) -> Autoscale:
        if self.min > self.max:
            raise FieldError("min", f"min ({self.min}) is above max ({self.max})")
        return self

    @abstractmethod
    def ratio(self, current: int, depth: int, busy: float) -> float:
        """The workers the metric wishes for, before rounding up: *current* workers,
        *depth* jobs queued, *busy* the fraction of workers holding a job."""

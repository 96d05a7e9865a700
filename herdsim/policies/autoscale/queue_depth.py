"""``metric: queue_depth``: KEDA's queue scalers, an ``AverageValue`` target of jobs
queued per worker: ``ceil(queue length / target)`` workers."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.autoscale.base import Autoscale


class QueueDepth(Autoscale):
    """``metric: queue_depth`` (KEDA)."""

    metric: Literal["queue_depth"]
    about: ClassVar[str] = "KEDA: ceil(jobs queued / target) workers"
    fluid: ClassVar[str | None] = "workers → queue length / target, every interval"

    def ratio(self, current: int, depth: int, busy: float) -> float:
        return depth / self.target

"""``model: queue`` (the default): slots and a waiting room, served by the workers."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.downstreams.base import Model


class Queue(Model):
    """``model: queue``: jobs offered at a rate to ``concurrency`` slots with a capacity,
    outages and a dead-letter queue (herdsim/model/downstream/core.py)."""

    model: Literal["queue"] = "queue"
    about: ClassVar[str] = "concurrency slots and a waiting room, served by queue workers"
    emulated: ClassVar[bool] = True
    fluid: ClassVar[str | None] = "service rate concurrency / mean service, a waiting room"

"""``arrivals: periodic``: ``clients`` clients, each firing once every ``interval`` (a
monitor, a cron job, a health check), in step or from a random first offset.

Client *i* fires at ``anchor + o_i + k × interval`` (k = 0, 1, …): ``offset: aligned``
puts every ``o_i`` at 0, so all clients fire together; ``offset: random`` draws each
``o_i`` uniformly in [0, interval) from a stream of its own. At each time of
``restarts`` every client starts over (the anchor moves there: in step again, or with
fresh offsets), as a scheduler does when its process restarts. The workload's rate is
``clients / interval`` (filled on load).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from herdsim.policies.arrivals.base import Source
from herdsim.policies.fields import MAX_WORKERS, NonNegativeDuration, Period

MAX_RESTARTS = 1_000  # restart times a scenario may list


class Periodic(Source):
    """``arrivals: periodic``."""

    arrivals: Literal["periodic"]
    clients: int = Field(ge=1, le=MAX_WORKERS, description="arrivals: periodic: clients, "
                                                           "each firing once an interval")
    interval: Period = Field(description="arrivals: periodic: the time between one "
                                         "client's firings")
    offset: Literal["aligned", "random"] = Field(
        "aligned", description="arrivals: periodic: every client fires first at 0 "
                               "(aligned) or at a uniform random offset within the interval")
    restarts: list[NonNegativeDuration] = Field(
        [], max_length=MAX_RESTARTS, description="arrivals: periodic: times at which every "
                                                 "client starts over (in step again, or "
                                                 "with fresh offsets)")
    about: ClassVar[str] = ("clients each firing every interval, in step (aligned) or from "
                            "a random first offset; restarts start them over")
    fluid: ClassVar[str | None] = "arrival rate clients/interval (the phases averaged out)"
    emulated: ClassVar[bool] = False  # the testbed's producer has no offsets stream
    knob: ClassVar[str] = "lower workload.clients or lengthen workload.interval"

    def rate(self) -> float:
        """Jobs per second over a whole interval."""
        return self.clients / self.interval

    def together(self) -> int:
        """Every client at once when in step; one at a time from random offsets."""
        return self.clients if self.offset == "aligned" else 1

    def anchors(self) -> list[float]:
        """The times the schedule starts over: 0 and each restart, in order."""
        return sorted({0.0, *self.restarts})

    def jobs_within(self, seconds: float) -> float:
        """Jobs arriving in [0, *seconds*): at most ``clients`` per started interval of
        each stretch between restarts."""
        edges = [a for a in self.anchors() if a < seconds] + [seconds]
        return float(sum(self.clients * math.ceil((b - a) / self.interval)
                         for a, b in zip(edges[:-1], edges[1:], strict=True)))

    def times(self, rng: np.random.Generator) -> Iterator[float]:
        """Every arrival time in order (the clients of one instant one after another),
        offsets drawn from *rng* at each anchor when random."""
        anchors = self.anchors()
        for start, end in zip(anchors, [*anchors[1:], math.inf], strict=True):
            offsets = (np.sort(rng.random(self.clients)) * self.interval
                       if self.offset == "random" else np.zeros(self.clients)).tolist()
            k = 0
            while True:
                base = start + k * self.interval
                if base >= end:
                    break
                for o in offsets:
                    t = base + o
                    if t >= end:
                        break
                    yield t
                k += 1

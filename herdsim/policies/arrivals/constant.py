"""``arrivals: constant``: evenly spaced arrivals, 1/rate apart."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.arrivals.base import Source


class Constant(Source):
    """``arrivals: constant``."""

    arrivals: Literal["constant"]
    about: ClassVar[str] = "one job every 1/rate seconds"
    fluid: ClassVar[str | None] = "arrival rate λ(t), the rate of the moment"

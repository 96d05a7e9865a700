"""``arrivals: poisson`` (the default): exponential gaps at the rate of the moment."""

from __future__ import annotations

from typing import ClassVar, Literal

from herdsim.policies.arrivals.base import Source


class Poisson(Source):
    """``arrivals: poisson``."""

    arrivals: Literal["poisson"] = "poisson"
    about: ClassVar[str] = "a Poisson process at the rate (a profile's, a spike's)"
    poisson: ClassVar[bool] = True
    fluid: ClassVar[str | None] = "arrival rate λ(t), the rate of the moment"

"""``distribution: constant``: every time is the mean."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from herdsim.policies.distributions.base import Distribution, Sampler


class Constant(Distribution):
    """``distribution: constant``."""

    distribution: Literal["constant"]
    about: ClassVar[str] = "every time is the mean (M/D/c)"

    def sampler(self, rng: np.random.Generator) -> Sampler:
        mean = self.mean
        return lambda n: np.full(n, mean)

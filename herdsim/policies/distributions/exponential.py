"""``distribution: exponential`` (the default): memoryless times of the given mean."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from herdsim.policies.distributions.base import Distribution, Sampler


class Exponential(Distribution):
    """``distribution: exponential``."""

    distribution: Literal["exponential"] = "exponential"
    about: ClassVar[str] = "exponential times of the mean (M/M/c)"

    def sampler(self, rng: np.random.Generator) -> Sampler:
        mean = self.mean
        return lambda n: rng.exponential(mean, n)

"""``distribution: lognormal``: heavy-tailed times of the given mean, ``sigma`` the
standard deviation of their log."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from herdsim.policies.distributions.base import Distribution, Sampler


class Lognormal(Distribution):
    """``distribution: lognormal``."""

    distribution: Literal["lognormal"]
    sigma: float = Field(0.5, gt=0, le=10, description="lognormal shape (std-dev of log)")
    about: ClassVar[str] = "lognormal times of the mean, shape sigma"

    def sampler(self, rng: np.random.Generator) -> Sampler:
        sigma = self.sigma
        mu = math.log(self.mean) - sigma**2 / 2  # so that the mean is the mean
        return lambda n: rng.lognormal(mu, sigma, n)

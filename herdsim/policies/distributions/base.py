"""What every service distribution has (its ``mean``) and its rule: a sampler of *n*
times from a numpy generator, used by the model and the testbed's emulator alike."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from herdsim.policies.family import Member
from herdsim.policies.fields import PositiveDuration

Sampler = Callable[[int], np.ndarray]
"""``sample(n)``: *n* times, in seconds."""


class Distribution(Member):
    """A distribution of times (a service, a network delay) with its mean."""

    mean: PositiveDuration = 0.1
    emulated: ClassVar[bool] = True  # the emulator draws its service times with it
    fluid: ClassVar[str | None] = "rate 1/mean per slot (only the mean)"

    @abstractmethod
    def sampler(self, rng: np.random.Generator) -> Sampler:
        """``sample(n)``: *n* times drawn from *rng*."""

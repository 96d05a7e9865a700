"""Which key a cached request asks for (``cache.keys.distribution``): :class:`Uniform` or
:class:`Zipf`, keys numbered from 1 (key 1 the most popular under Zipf). Each member's
``sampler(rng)`` draws keys in blocks from the cache's own random stream."""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import MAX_CACHE_KEYS, MAX_KEY_TABLE, FieldError, number_text

RATIO_TAIL = 1.1  # below this alpha, an unbounded or huge key space is refused (see Zipf)


class Keys(Member):
    """A key distribution over ``count`` keys."""

    emulated: ClassVar[bool] = False  # the testbed has no cache

    @abstractmethod
    def sampler(self, rng: np.random.Generator):
        """``sample(n)``: *n* keys drawn from *rng*."""


class Uniform(Keys):
    """``distribution: uniform``: every key of ``count`` equally likely."""

    distribution: Literal["uniform"]
    count: int = Field(ge=1, le=MAX_CACHE_KEYS, description="keys requested")
    about: ClassVar[str] = "every one of count keys equally likely"
    fluid: ClassVar[str | None] = "hit rate min(1, size / count) once warm (LRU)"

    def sampler(self, rng: np.random.Generator):
        count = self.count
        return lambda n: rng.integers(1, count + 1, n)


class Zipf(Keys):
    """``distribution: zipf``: key *k* with weight ``k^-alpha``, over ``count`` keys (null:
    every positive integer, numpy's ``Generator.zipf``, which needs alpha > 1)."""

    distribution: Literal["zipf"] = "zipf"
    alpha: float = Field(1.0, gt=0, le=10, description="skew: key k has weight k^-alpha")
    count: int | None = Field(None, ge=1, le=MAX_CACHE_KEYS,
                              description="keys requested (null: unbounded, alpha > 1)")
    about: ClassVar[str] = "key k with weight k^-alpha over count keys (null: unbounded)"
    fluid: ClassVar[str | None] = "hit rate by Che's approximation (LRU)"

    @model_validator(mode="after")
    def _drawable(self) -> Zipf:
        if self.count is None and self.alpha <= 1:
            raise FieldError("alpha", f"alpha {self.alpha:g} over unbounded keys has no "
                                      "distribution: give count, or alpha > 1")
        if (self.count is None or self.count > MAX_KEY_TABLE) and self.alpha < RATIO_TAIL:
            shown = "unbounded" if self.count is None else number_text(self.count)
            raise FieldError("count", f"{shown} keys with alpha {self.alpha:g}: at most "
                                      f"{MAX_KEY_TABLE:,} keys below alpha {RATIO_TAIL:g} "
                                      "(a table of their weights is kept)")
        return self

    def weights(self) -> np.ndarray:
        """The keys' probabilities, key 1 first (only for a table-sized ``count``)."""
        assert self.count is not None and self.count <= MAX_KEY_TABLE
        w = np.arange(1, self.count + 1, dtype=float) ** -self.alpha
        return w / w.sum()

    def sampler(self, rng: np.random.Generator):
        alpha, count = self.alpha, self.count
        if count is not None and count <= MAX_KEY_TABLE:
            cdf = np.cumsum(self.weights())
            cdf[-1] = 1.0
            return lambda n: np.searchsorted(cdf, rng.random(n), side="right") + 1

        def sample(n: int) -> np.ndarray:
            # numpy's unbounded Zipf, draws beyond count redrawn: the truncated law
            keys = rng.zipf(alpha, n)
            if count is not None:
                bad = keys > count
                while bad.any():  # alpha >= 1.1 and count > 10^6: most draws are kept
                    keys[bad] = rng.zipf(alpha, int(bad.sum()))
                    bad = keys > count
            return keys
        return sample


FAMILY = Family("cache key distribution", "key distribution", "distribution",
                (Zipf, Uniform), default="zipf")
KeyDistribution = FAMILY.union()

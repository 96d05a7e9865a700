"""How the cache chooses what to keep (``cache.eviction.policy``): :class:`Lru` or
:class:`Ttl`. Each member's ``store(size)`` is its rule (:mod:`.stores`)."""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.cache.stores import LruStore, TtlStore
from herdsim.policies.family import Family, Member
from herdsim.policies.fields import NonNegativeDuration, PositiveDuration


class Eviction(Member):
    """An eviction policy."""

    emulated: ClassVar[bool] = False  # the testbed has no cache

    @abstractmethod
    def store(self, size: int) -> LruStore:
        """An empty store of at most *size* keys under this policy."""


class Lru(Eviction):
    """``policy: lru``: least recently used out first."""

    policy: Literal["lru"] = "lru"
    evict_on_miss: bool = Field(
        False, description="a miss on a full cache evicts the least recently used key even "
                           "when nothing is filled (Brooker's cache_sim.py)")
    about: ClassVar[str] = "least recently used key evicted when full"
    fluid: ClassVar[str | None] = "Che's approximation: characteristic time T, hit 1 - e^(-λT)"

    def store(self, size: int) -> LruStore:
        return LruStore(size, self.evict_on_miss)


class Ttl(Eviction):
    """``policy: ttl``: LRU order, and each entry fresh for ``ttl`` after its fill."""

    policy: Literal["ttl"]
    ttl: PositiveDuration = Field(description="how long a filled entry stays fresh")
    stale: NonNegativeDuration = Field(
        0.0, description="serve-stale-while-revalidate: how long past its ttl an entry is "
                         "still served while one refresh goes to the tier")
    about: ClassVar[str] = "fresh for ttl after a fill (then stale for stale), LRU when full"
    fluid: ClassVar[str | None] = "hit 1 - 1/(1 + λ ttl) per key while the cache is large"

    def store(self, size: int) -> TtlStore:
        return TtlStore(size, self.ttl, self.stale)


FAMILY = Family("cache eviction", "eviction", "policy", (Lru, Ttl), default="lru")
Policy = FAMILY.union()

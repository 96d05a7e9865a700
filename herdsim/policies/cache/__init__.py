"""A cache in front of a tier (``downstream.cache``, ``services.<name>.cache``): its
section :class:`Cache` and two families, the eviction policy (:mod:`.eviction`: ``lru``,
``ttl``) and the key distribution (:mod:`.keys`: ``zipf``, ``uniform``). The entries
are pure objects (:mod:`.stores`); the model's ``herdsim/model/cache.py`` puts them in
front of a downstream.

These keys are the cache's own: ``workload.keys`` is client-go's workqueue dedup (a job
whose key is queued merges into it), a different thing, and neither reads the other.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Discriminator, Field, Tag, model_validator

from herdsim.policies.cache import eviction, keys
from herdsim.policies.cache.eviction import Lru, Policy
from herdsim.policies.cache.keys import KeyDistribution
from herdsim.policies.cache.stores import HIT, MISS, STALE, LruStore, TtlStore
from herdsim.policies.distributions import Distribution
from herdsim.policies.distributions.constant import Constant
from herdsim.policies.family import TAG_MARK
from herdsim.policies.fields import (
    MAX_CACHE_SIZE,
    FieldError,
    NonNegativeDuration,
    Section,
    number_text,
)


def _latency_form(value: Any) -> str:
    """Which form a hit latency is given in: a section is a distribution, else a
    duration (so a bad one is refused once, as what it was given as)."""
    form = "distribution" if isinstance(value, (dict, BaseModel)) else "duration"
    return f"as{TAG_MARK}{form}"


HitLatency = Annotated[
    Annotated[Distribution, Tag(f"as{TAG_MARK}distribution")]
    | Annotated[NonNegativeDuration, Tag(f"as{TAG_MARK}duration")],
    Discriminator(_latency_form)]


class Cache(Section):
    """``cache``: a read-through cache answering keyed requests in front of its tier."""

    size: int = Field(ge=1, le=MAX_CACHE_SIZE, description="entries the cache holds")
    eviction: Policy = Field(default_factory=Lru,  # type: ignore[arg-type]
                                      description="policy: lru or ttl")
    keys: KeyDistribution = Field(description="which key each request asks for")
    hit_latency: HitLatency | None = Field(
        None, description="time a hit takes: a duration or a distribution (null: at once)")
    coalesce: bool = Field(False, description="single-flight: a miss on a key already "
                                              "being fetched waits for that call")
    warm: bool = Field(True, description="start primed with keys 1..size (the most "
                                         "popular under zipf); false: a cold start")

    @model_validator(mode="after")
    def _primable(self) -> Cache:
        count = self.keys.count
        if self.warm and count is not None and count < self.size:
            raise FieldError("size", f"a warm cache of {number_text(self.size)} entries "
                                     f"over {number_text(count)} keys: size at most count")
        return self

    @model_validator(mode="after")
    def _latency_as_a_distribution(self) -> Cache:
        """A duration given for ``hit_latency`` is held as a constant distribution (0:
        none), so the field holds a member or nothing once validated."""
        value = self.hit_latency
        if isinstance(value, (int, float)):
            latency = Constant(distribution="constant", mean=value) if value > 0 else None
            object.__setattr__(self, "hit_latency", latency)
        return self

    def latency(self) -> Distribution | None:
        """The hit latency's distribution, or None: at once."""
        return self.hit_latency  # type: ignore[return-value]  # (a duration became one)

    def store(self) -> LruStore:
        """The cache's entries at t = 0: primed with keys 1..size when warm."""
        store = self.eviction.store(self.size)
        if self.warm:
            store.prime(range(1, self.size + 1))
        return store


FAMILIES = (eviction.FAMILY, keys.FAMILY)

__all__ = ["FAMILIES", "HIT", "MISS", "STALE", "Cache", "LruStore", "TtlStore"]

"""The hit rate a warm LRU cache settles at under independent requests, by Che's
approximation (Che, Tung and Wang, IEEE JSAC 2002; Fricker, Robert and Roberts, ITC
2012, on its accuracy): each key stays for a characteristic time *T* after its last
request, the one at which the keys expected in the cache fill it,
``sum_k (1 - exp(-p_k T)) = size``, and key *k* hits with probability
``1 - exp(-p_k T)``. The reference a cache that starts cold is held to
(:mod:`herdsim.analysis.loops`): it has no window before its trigger to measure one in.
"""

from __future__ import annotations

import numpy as np

from herdsim.policies.cache import Cache
from herdsim.policies.cache.eviction import Lru
from herdsim.policies.cache.keys import Uniform, Zipf
from herdsim.policies.fields import MAX_KEY_TABLE

STEPS = 64  # bisection steps on log T (a bracket ~80 wide in log: 1e-17 at the end)


def che_hit_rate(probabilities: np.ndarray, size: int) -> float:
    """The LRU hit rate over keys of *probabilities* (summing to 1) with *size* entries."""
    p = np.asarray(probabilities, dtype=float)
    p = p[p > 0]
    if size >= p.size:
        return 1.0
    low, high = np.log(1e-12 / p.max()), np.log(1e12 / p.min())
    for _ in range(STEPS):  # the expected keys in the cache grow with T
        mid = (low + high) / 2
        if (-np.expm1(-p * np.exp(mid))).sum() < size:
            low = mid
        else:
            high = mid
    return float((p * -np.expm1(-p * np.exp((low + high) / 2))).sum())


def lru_hit_rate(cache: Cache) -> float | None:
    """The warm hit rate of *cache*: exact for uniform keys (size / count), Che's
    approximation for Zipf keys of a table's count; None for what it does not cover (a
    TTL, Brooker's evict-on-miss quirk, unbounded or huge Zipf key spaces)."""
    eviction, keys = cache.eviction, cache.keys
    if not isinstance(eviction, Lru) or eviction.evict_on_miss:
        return None
    if isinstance(keys, Uniform):
        return min(1.0, cache.size / keys.count)
    if isinstance(keys, Zipf) and keys.count is not None and keys.count <= MAX_KEY_TABLE:
        return che_hit_rate(keys.weights(), cache.size)
    return None

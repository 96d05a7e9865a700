"""What a cache adds to the estimate: the share of its tier's requests that miss (the
calls its tier's own edges then make, in :func:`herdsim.planning.calls.walk`), its
memory and the work of priming it.

A hit costs about what a call costs (its event, its key, its counter), so the requests a
cache answers stay in the calls of the estimate and of the bound; what it saves is the
calls behind it. The bound assumes every request may miss (a flush, a cold start): the
share below enters only the ``likely`` figures. It is the warm cache's, as if it held the
``size`` most popular keys (an upper bound on LRU's hit rate under independent requests),
with the Zipf sums by their integral, so it costs nothing per key.
"""

from __future__ import annotations

import math

from herdsim.policies.cache import Cache
from herdsim.policies.cache.keys import Zipf
from herdsim.policies.fields import MAX_KEY_TABLE

BYTES_PER_ENTRY = 120  # an OrderedDict entry: key, fill time, links
BYTES_PER_TABLED_KEY = 16  # a Zipf key's weight and cumulative weight
WORK_PER_ENTRY = 0.1  # priming one entry, in calibration calls (a dict insert)


def _zipf_mass(n: float, alpha: float) -> float:
    """The sum of k^-alpha for k = 1..n, by its integral (Euler-Maclaurin's first terms)."""
    if n <= 1:
        return 1.0
    flat = abs(alpha - 1.0) < 1e-9
    tail = math.log(n) if flat else (n ** (1.0 - alpha) - 1.0) / (1.0 - alpha)
    return 1.0 + tail - 0.5 * (1.0 - n ** -alpha)


def miss_share(cache: Cache) -> float:
    """The share of requests a warm *cache* misses (0..1), as if it held the ``size``
    most popular keys."""
    keys = cache.keys
    count = keys.count
    if count is not None and cache.size >= count:
        return 0.0
    if isinstance(keys, Zipf):
        alpha = keys.alpha
        total = _zipf_mass(count, alpha) if count is not None else \
            1.0 / (alpha - 1.0) + 0.5 + alpha / 12.0  # zeta(alpha) for alpha > 1
        return max(0.0, 1.0 - _zipf_mass(cache.size, alpha) / total)
    return 1.0 - cache.size / count  # type: ignore[operator]  # uniform: count is set


def memory(cache: Cache) -> float:
    """Bytes the cache holds at most: its entries and, for a tabled Zipf, the weights."""
    tabled = cache.keys.count if isinstance(cache.keys, Zipf) and cache.keys.count \
        and cache.keys.count <= MAX_KEY_TABLE else 0
    return cache.size * BYTES_PER_ENTRY + tabled * BYTES_PER_TABLED_KEY


def priming(cache: Cache) -> float:
    """Work of filling a warm cache at t = 0, in calibration calls."""
    return cache.size * WORK_PER_ENTRY if cache.warm else 0.0

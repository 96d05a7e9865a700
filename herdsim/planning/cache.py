"""What a cache adds to the estimate: the share of its tier's requests that miss (the
calls its tier's own edges then make, in :func:`herdsim.planning.calls.walk`), its
memory and the work of priming it.

A hit costs about what a call costs (its event, its key, its counter), so the requests a
cache answers stay in the calls of the estimate and of the bound; what it saves is the
calls behind it. The bound assumes every request may miss (a flush, a cold start): the
share below enters only the ``likely`` figures. It is the warm cache's, as if it held the
``size`` most popular keys (an upper bound on LRU's hit rate under independent requests:
a run misses more, 0.52 against 0.40 at 10,000 Zipf(1) keys and 200 entries), with the
Zipf sums' tails by Euler-Maclaurin, so it costs the same at any number of keys.
"""

from __future__ import annotations

import math

import numpy as np

from herdsim.policies.cache import Cache
from herdsim.policies.cache.keys import Zipf
from herdsim.policies.fields import MAX_KEY_TABLE

BYTES_PER_ENTRY = 120  # an OrderedDict entry: key, fill time, links
BYTES_PER_TABLED_KEY = 16  # a Zipf key's weight and cumulative weight
WORK_PER_ENTRY = 0.1  # priming one entry, in calibration calls (a dict insert)


EXACT_TERMS = 1000  # the sums' first terms added exactly; the rest by Euler-Maclaurin


def _zipf_mass(n: float, alpha: float) -> float:
    """The sum of k^-alpha for k = 1..n (n may be inf, alpha > 1 then): the first
    :data:`EXACT_TERMS` terms exactly, the rest by Euler-Maclaurin (the integral, the end
    terms' halves and the first derivative term), so a sum costs the same at any n."""
    exact = int(min(n, EXACT_TERMS))
    head = float((np.arange(1, exact + 1, dtype=float) ** -alpha).sum())
    if n <= exact:
        return head
    a = exact + 1.0  # the rest: f(a) + ... + f(n), f(x) = x^-alpha
    if math.isinf(n):
        integral = a ** (1.0 - alpha) / (alpha - 1.0)
        return head + integral + 0.5 * a ** -alpha + alpha / 12.0 * a ** (-alpha - 1.0)
    flat = abs(alpha - 1.0) < 1e-9
    integral = math.log(n / a) if flat else (n ** (1.0 - alpha) - a ** (1.0 - alpha)) \
        / (1.0 - alpha)
    return head + integral + 0.5 * (a ** -alpha + n ** -alpha) \
        + alpha / 12.0 * (a ** (-alpha - 1.0) - n ** (-alpha - 1.0))


def miss_share(cache: Cache) -> float:
    """The share of requests a warm *cache* misses (0..1), as if it held the ``size``
    most popular keys."""
    keys = cache.keys
    count = keys.count
    if count is not None and cache.size >= count:
        return 0.0
    if isinstance(keys, Zipf):
        alpha = keys.alpha
        total = _zipf_mass(count if count is not None else math.inf, alpha)
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

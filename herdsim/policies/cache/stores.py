"""The cache's entries as pure objects (no SimPy): an LRU store and a TTL store (LRU
order, each entry fresh for ``ttl`` after it was filled, then served stale for
``stale`` more while one refresh goes out). ``lookup(key, now)`` answers :data:`HIT`,
:data:`STALE` or :data:`MISS`; ``fill(key, now)`` stores a key the tier answered."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

HIT, STALE, MISS = range(3)


class LruStore:
    """At most ``size`` keys; a hit makes its key the most recently used, a fill of a
    full store evicts the least recently used one. With ``evict_on_miss`` (the quirk of
    Brooker's ``cache_sim.py``) a miss on a full store evicts the least recently used
    key at once, whether or not the key is filled afterwards."""

    __slots__ = ("size", "entries", "evict_on_miss")

    def __init__(self, size: int, evict_on_miss: bool = False):
        self.size = size
        self.evict_on_miss = evict_on_miss
        self.entries: OrderedDict[int, float] = OrderedDict()  # key -> when filled

    def __len__(self) -> int:
        return len(self.entries)

    def prime(self, keys: Iterable[int], now: float = 0.0) -> None:
        """Fill *keys* in order (the first is the least recently used)."""
        for key in keys:
            self.fill(key, now)

    def lookup(self, key: int, now: float) -> int:
        entries = self.entries
        if key in entries:
            entries.move_to_end(key)
            return HIT
        if self.evict_on_miss and len(entries) >= self.size:
            entries.popitem(last=False)
        return MISS

    def fill(self, key: int, now: float) -> None:
        entries = self.entries
        if key in entries:
            entries.move_to_end(key)
        elif len(entries) >= self.size:
            entries.popitem(last=False)
        entries[key] = now

    def flush(self) -> None:
        self.entries.clear()


class TtlStore(LruStore):
    """An :class:`LruStore` whose entries are fresh for ``ttl`` after their fill; an
    entry expired less than ``stale`` ago answers :data:`STALE` (served, and due a
    refresh); one expired longer is dropped and the lookup misses."""

    __slots__ = ("ttl", "stale")

    def __init__(self, size: int, ttl: float, stale: float = 0.0):
        super().__init__(size)
        self.ttl = ttl
        self.stale = stale

    def lookup(self, key: int, now: float) -> int:
        entries = self.entries
        filled = entries.get(key)
        if filled is None:
            return MISS
        age = now - filled
        if age < self.ttl:
            entries.move_to_end(key)
            return HIT
        if age < self.ttl + self.stale:
            entries.move_to_end(key)
            return STALE
        del entries[key]
        return MISS

"""Consistent hashing for keyed work: ring hash (Karger et al.) and Maglev (Eisenbud et
al., NSDI 2016), each built over the eligible hosts and rebuilt when they change.

Read from Envoy (``ring_hash/ring_hash_lb.cc`` and ``maglev/maglev_lb.cc``,
envoyproxy/envoy commits e7495d26 and a6b64f4b, the v1.36 line). Ring hash: with equal
weights each host takes ``ceil(minimum_ring_size / hosts)`` points, the hashes of
``"<host>_<i>"``; a key goes to the first point at or after its hash, wrapping. Maglev:
a prime table (65537 by default); each host walks its permutation ``(offset + j *
skip) mod M`` (``offset`` and ``skip`` from two hashes of its name) and the hosts take
turns claiming their next free slot until the table is full; a key goes to
``table[hash mod M]``. Envoy hashes with xxHash64; herdsim with BLAKE2b (64 bits), so
the picks differ from Envoy's while the properties (balance, ~1/n of keys moving when
one of n hosts leaves) are the same and are what the tests check.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from herdsim.policies.balancers.base import Balancer

MAX_TABLE = 1_000_003  # ring points or Maglev slots (Envoy allows 8M and 5M): built in Python
BUILT = 8  # tables kept, one per eligible set seen (the oldest dropped first)
HASHES_KEPT = 1 << 16  # keys whose hash is kept (more are hashed at each pick: RAM stays flat)


def hash64(text: str, salt: bytes = b"") -> int:
    """A 64-bit hash of *text* (BLAKE2b; Envoy uses xxHash64)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8, salt=salt).digest(),
                          "little")


class _Tables:
    """The hash structure per eligible host set, built when a set is first seen."""

    __slots__ = ("build", "built", "keys")

    def __init__(self, build: Callable[[tuple[int, ...]], Callable[[int, int], int]]):
        self.build = build
        self.built: dict[tuple[int, ...], Callable[[int, int], int]] = {}
        self.keys: dict[int, int] = {}

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        return self._lookup(hosts)(self._hashed(key), 0)

    def again(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        """A retry's second pick (Envoy's attempt 1): the ring's next point; Maglev's
        entry for the key hashed again with the attempt."""
        return self._lookup(hosts)(self._hashed(key), 1)

    def _lookup(self, hosts: Sequence[int]) -> Callable[[int, int], int]:
        eligible = tuple(hosts)
        lookup = self.built.get(eligible)
        if lookup is None:
            if len(self.built) >= BUILT:
                del self.built[next(iter(self.built))]
            lookup = self.built[eligible] = self.build(eligible)
        return lookup

    def _hashed(self, key: int) -> int:
        hashed = self.keys.get(key)
        if hashed is None:
            hashed = hash64(f"key-{key}")
            if len(self.keys) < HASHES_KEPT:
                self.keys[key] = hashed
        return hashed


class RingHash(Balancer):
    """``kind: ring_hash``: the first ring point at or after the key's hash."""

    kind: Literal["ring_hash"]
    minimum_ring_size: int = Field(1024, ge=1, le=MAX_TABLE,
                                   description="ring points at least (Envoy's default 1024)")
    about: ClassVar[str] = "consistent hashing on a ring of minimum_ring_size points " \
                           "(Envoy RING_HASH); the key: the request's (a job's workload key, a " \
                           "cache's key), else the caller"
    keyed: ClassVar[bool] = True

    def picker(self, n: int, draw: Callable[[], float]) -> _Tables:
        return _Tables(self.ring)

    def table_entries(self) -> int:
        return self.minimum_ring_size

    def ring(self, hosts: tuple[int, ...]) -> Callable[[int, int], int]:
        """The lookup of the ring over *hosts*: a key's hash (and the retry's attempt, 0
        for a first pick: Envoy moves that many points on) to its host."""
        per_host = -(-self.minimum_ring_size // len(hosts))
        points = sorted((hash64(f"replica-{h}_{i}"), h) for h in hosts for i in range(per_host))
        hashes = [p for p, _ in points]
        owners = [h for _, h in points]

        def lookup(hashed: int, attempt: int = 0) -> int:
            at = bisect.bisect_left(hashes, hashed)
            return owners[((at if at < len(owners) else 0) + attempt) % len(owners)]

        return lookup


class Maglev(Balancer):
    """``kind: maglev``: ``table[hash mod M]``, the table filled by the hosts' turns."""

    kind: Literal["maglev"]
    table_size: int = Field(65537, ge=2, le=MAX_TABLE,
                            description="a prime, larger than 100 × replicas "
                                        "(Envoy's default 65537)")
    about: ClassVar[str] = "Maglev consistent hashing over a prime table (Envoy MAGLEV); the " \
                           "key: the request's (a job's workload key, a cache's key), else " \
                           "the caller"
    keyed: ClassVar[bool] = True

    @field_validator("table_size")
    @classmethod
    def _prime(cls, size: int) -> int:
        if size < 2 or any(size % d == 0 for d in range(2, math.isqrt(size) + 1)):
            raise ValueError(f"{size} is not a prime (Maglev's table size must be one: "
                             "65537, 131071, 1000003 …)")
        return size

    def picker(self, n: int, draw: Callable[[], float]) -> _Tables:
        return _Tables(self.table)

    def table_entries(self) -> int:
        return self.table_size

    def table(self, hosts: tuple[int, ...]) -> Callable[[int, int], int]:
        """The lookup of the Maglev table over *hosts* (a retry's attempt hashes the key
        again with it)."""
        m = self.table_size
        offsets = [hash64(f"replica-{h}", b"offset") % m for h in hosts]
        skips = [hash64(f"replica-{h}", b"skip") % (m - 1) + 1 for h in hosts]
        nexts = [0] * len(hosts)
        table = [-1] * m
        filled = 0
        while True:
            for i, host in enumerate(hosts):
                slot = (offsets[i] + nexts[i] * skips[i]) % m
                while table[slot] >= 0:
                    nexts[i] += 1
                    slot = (offsets[i] + nexts[i] * skips[i]) % m
                table[slot] = host
                nexts[i] += 1
                filled += 1
                if filled == m:
                    return lambda hashed, attempt=0: table[  # type: ignore[misc]
                        (hash64(f"{hashed}-{attempt}") if attempt else hashed) % m]

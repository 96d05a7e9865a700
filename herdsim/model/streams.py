"""Random streams: one independent generator per purpose (common random numbers).

Changing the retry strategy must change nothing but the strategy's own draws, so every
purpose gets its own child of ``SeedSequence(seed)``. New purposes go at the end of
``PURPOSES``: the children are keyed by position, so existing streams stay identical.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

PURPOSES = ("arrivals", "poison", "service", "outages", "strategy", "breaker", "budget",
            "network", "request", "clients")
BLOCK = 4096


def generators(seed: int) -> dict[str, np.random.Generator]:
    """One generator per purpose, derived from *seed*."""
    children = np.random.SeedSequence(seed).spawn(len(PURPOSES))
    pairs = zip(PURPOSES, children, strict=True)
    return {name: np.random.default_rng(child) for name, child in pairs}


class Draws:
    """Scalar draws from a vectorised sampler, produced a block at a time.

    ``draws()`` costs a list pop instead of a numpy call: the hot path uses it for
    service times and inter-arrival gaps.
    """

    __slots__ = ("_sample", "_buffer")

    def __init__(self, sample: Callable[[int], np.ndarray]):
        self._sample = sample
        self._buffer: list[float] = []

    def __call__(self) -> float:
        buffer = self._buffer
        if not buffer:
            buffer = self._buffer = self._sample(BLOCK)[::-1].tolist()
        return buffer.pop()

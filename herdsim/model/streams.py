"""Random streams: one independent generator per purpose (common random numbers).

Changing the retry strategy must change nothing but the strategy's own draws, so every
purpose gets its own child of ``SeedSequence(seed)``. New purposes go at the end of
``PURPOSES``: the children are keyed by position, so existing streams stay identical.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, repeat
from typing import Any

import numpy as np

PURPOSES = ("arrivals", "poison", "service", "outages", "strategy", "breaker", "budget",
            "network", "request", "clients", "admission", "keys", "cache_keys",
            "cache_latency", "offsets", "overhead", "criticality")
BLOCK = 4096


def generators(seed: int) -> dict[str, np.random.Generator]:
    """One generator per purpose, derived from *seed*."""
    children = np.random.SeedSequence(seed).spawn(len(PURPOSES))
    pairs = zip(PURPOSES, children, strict=True)
    return {name: np.random.default_rng(child) for name, child in pairs}


Sample = Callable[[int], np.ndarray]
"""A vectorised sampler: ``sample(n)`` returns the next *n* numbers of a stream."""

Draws = Callable[[], float]
"""A scalar draw: ``draw()`` returns the next number of a stream."""


def draws(sample: Sample) -> Draws:
    """Scalar draws from a vectorised sampler, produced ``BLOCK`` at a time.

    The returned callable is the C-level ``__next__`` of a chain over blocks: a draw on
    the hot path (service times, inter-arrival gaps) costs no Python frame, and the
    numbers come in the order ``sample`` produces them.
    """
    blocks = map(lambda _: sample(BLOCK).tolist(), repeat(None))
    return chain.from_iterable(blocks).__next__


def uniform(rng: np.random.Generator) -> Draws:
    """Scalar uniform [0, 1) draws of *rng*."""
    return draws(lambda n: rng.random(n))


def server_draws(cfg: Any, rngs: dict[str, np.random.Generator],
                 service_draws: Callable[[Any, np.random.Generator], Draws]) -> dict[str, Any]:
    """The draws a downstream section *cfg*'s server is built with (its keyword
    arguments), each from its own stream of *rngs* (``service``, ``outages``, ``network``,
    ``request``, and ``admission`` when it defends itself); ``service_draws(section,
    rng)`` makes a service-time section's draws."""
    args: dict[str, Any] = {
        "service": service_draws(cfg.service, rngs["service"]),
        "outage_draw": uniform(rngs["outages"]),
        "network": (service_draws(cfg.network_delay, rngs["network"])
                    if cfg.network_delay else None),
        "request": (service_draws(cfg.request_delay, rngs["request"])
                    if cfg.request_delay else None)}
    if cfg.defends():
        args["draw"] = uniform(rngs["admission"])
    return args

"""The retry library's own object as a herdsim strategy: a tenacity wait or a backoff wait
generator, so a notebook simulates the very object its service uses.

``retry.strategy: module:attribute`` may name such an object (``__main__:wait`` in a
notebook). The library draws its own random numbers from Python's global ``random``; the
adapter seeds it from the run's strategy stream before each draw and restores it after,
so a run stays reproducible and the caller's ``random`` state is untouched. Needs the
optional extras ``herdsim[tenacity]`` or ``herdsim[backoff]``.
"""

from __future__ import annotations

import functools
import inspect
import random
from types import SimpleNamespace


def _seeded_call(rng, draw):
    """``draw()`` with Python's ``random`` seeded from *rng*, its state restored after."""
    saved = random.getstate()
    random.seed(int(rng.integers(0, 2**63)))
    try:
        return draw()
    finally:
        random.setstate(saved)


class TenacityWait:
    """A tenacity ``wait_*`` object. tenacity numbers attempts from 1: the wait after the
    first failure sees ``attempt_number == 1`` (herdsim's attempt 0)."""

    name = "tenacity"
    stateful = False

    def __init__(self, wait, base: float, cap: float):
        self.wait, self.base, self.cap = wait, float(base), float(cap)
        self.formula = f"tenacity {wait!r}"

    def sleep(self, attempt, prev, rng):
        state = SimpleNamespace(attempt_number=attempt + 1, outcome=None, idle_for=0.0,
                                seconds_since_start=None, upcoming_sleep=0.0)
        return float(_seeded_call(rng, lambda: self.wait(state)))

    def __repr__(self) -> str:
        return f"TenacityWait({self.wait!r})"


class BackoffWait:
    """A backoff wait generator (``backoff.expo``, ``backoff.fibo``, ``backoff.constant``
    or a ``functools.partial`` of one) with backoff's default ``full_jitter``, as
    ``backoff.on_exception`` uses them. Each job gets its own generator (the state carried
    between its retries); ``params`` go to the generator, ``jitter: none`` turns jitter off.
    """

    name = "backoff"
    stateful = True

    def __init__(self, wait_gen, base: float, cap: float, jitter: str = "full", **kwargs):
        if jitter not in ("full", "none"):
            raise ValueError(f"jitter must be 'full' or 'none', got {jitter!r}")
        self.wait_gen, self.kwargs = wait_gen, kwargs
        self.base, self.cap = float(base), float(cap)
        self.jitter = jitter
        self.formula = f"backoff {getattr(wait_gen, '__name__', wait_gen)!r}, jitter {jitter}"

    def sleep(self, attempt, prev, rng):
        gen = prev
        if attempt == 0 or not inspect.isgenerator(gen):
            gen = self.wait_gen(**self.kwargs)
            next(gen)  # backoff advances past the initial send() the same way

        def draw():
            value = gen.send(None)
            if self.jitter == "full":
                import backoff

                return backoff.full_jitter(value)
            return value

        return float(_seeded_call(rng, draw)), gen

    def __repr__(self) -> str:
        return f"BackoffWait({self.wait_gen!r}, jitter={self.jitter!r})"


def _is_generator_function(obj) -> bool:
    if isinstance(obj, functools.partial):
        return _is_generator_function(obj.func)
    return inspect.isgeneratorfunction(obj)


def wrap(obj, base: float, cap: float, params: dict):
    """A strategy around a library object, or None when *obj* is neither kind."""
    cls = type(obj)
    if cls.__module__.split(".")[0] == "tenacity" and callable(obj):
        if params:
            raise TypeError("a tenacity wait takes no params (configure the object itself)")
        return TenacityWait(obj, base, cap)
    if _is_generator_function(obj):
        return BackoffWait(obj, base, cap, **params)
    return None

"""Backoff strategies (``retry.strategy`` and ``params``): small pure objects that know
nothing of SimPy; ``sleep(attempt, prev, rng)`` returns the sleep before the next try.

:mod:`.base` (the :class:`Strategy` base and its declarations), :mod:`.classic` (fixed,
exponential and the jitters), :mod:`.libraries` (the libraries' own schedules) and
:mod:`.registry` (:data:`FAMILY`, names, entry points and import paths, ``build``).
"""

from __future__ import annotations

from herdsim.policies.backoff.base import ParamsError, Strategy
from herdsim.policies.backoff.registry import BUILT_IN, FAMILY, LIBRARY

__all__ = ["BUILT_IN", "FAMILY", "LIBRARY", "ParamsError", "Strategy"]

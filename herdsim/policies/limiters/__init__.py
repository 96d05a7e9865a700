"""Admission limits as pure objects (no SimPy): what a server admits at once.

Every limiter answers one protocol, read by the downstream:

* ``limit_at(now)`` — the limit on calls admitted (in service plus waiting) at *now*;
* ``sample(now, start, inflight, dropped)`` — a call admitted at *start*, when *inflight*
  calls (itself included) were admitted, has left at *now*: served (``dropped`` False) or
  dropped without an answer (``dropped`` True).

One module per library algorithm, each as the library ships it with its defaults:
:mod:`.fixed`, :mod:`.aimd`, :mod:`.vegas` and :mod:`.gradient2` (Netflix
concurrency-limits, with :mod:`.window` for its ``WindowedLimit``) and :mod:`.envoy`
(Envoy's adaptive concurrency gradient controller). :func:`build` makes the one a
scenario's ``downstream.admission`` section names.
"""

from __future__ import annotations

from collections.abc import Callable

from herdsim.policies.limiters.aimd import AIMDLimit
from herdsim.policies.limiters.base import Limit, Limiter
from herdsim.policies.limiters.envoy import GradientController
from herdsim.policies.limiters.fixed import FixedLimit
from herdsim.policies.limiters.gradient2 import Gradient2Limit
from herdsim.policies.limiters.vegas import VegasLimit
from herdsim.policies.limiters.window import WindowedLimit

KINDS = ("fixed", "aimd", "vegas", "gradient2", "envoy")


def build(cfg, draw: Callable[[], float]) -> Limiter:
    """The limiter *cfg* (a ``downstream.admission`` section) describes; *draw* returns
    uniform numbers in [0, 1) for the algorithms that jitter (Vegas, Envoy)."""
    kind = cfg.kind
    given = {name: value for name, value in cfg.params().items() if value is not None}
    if kind == "fixed":
        return FixedLimit(**given)
    if kind == "envoy":
        return GradientController(draw=draw, **given)
    windowed = given.pop("windowed", kind == "gradient2")
    limit: Limit
    if kind == "aimd":
        limit = AIMDLimit(**given)
    elif kind == "vegas":
        limit = VegasLimit(draw=draw, **given)
    else:
        limit = Gradient2Limit(**given)
    return WindowedLimit(limit) if windowed else limit

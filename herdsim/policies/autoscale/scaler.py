"""The autoscaler's decision: pure, no SimPy.

The metric's member gives the workers it wishes for (KEDA's ``ceil(queue length /
target)``, the HPA's ``ceil(current × utilisation / target)``), then bounded by the step
limit (workers added or removed per decision), by ``min`` and ``max``, and scale-in
waits ``cooldown`` after the last change.
"""

from __future__ import annotations

import math

from herdsim.policies.autoscale.base import Autoscale

EPSILON = 1e-9  # ceil(10 × 0.7 / 0.7) is 11 in floating point without it


class Autoscaler:
    """``decide(now, current, depth, busy)``: how many workers to run from *now* on;
    *cfg* is a scenario's ``workers.autoscale`` (its metric's member)."""

    def __init__(self, cfg: Autoscale):
        self.cfg = cfg
        self.changed_at = -math.inf

    def desired(self, current: int, depth: int, busy: float) -> int:
        """The metric's wish rounded up, up to ``max`` + 1 (more can never be run), *busy*
        the fraction of workers holding a job. (A tiny target makes the ratio infinite.)"""
        ratio = self.cfg.ratio(current, depth, busy)
        return math.ceil(min(ratio - EPSILON, self.cfg.max + 1.0))

    def decide(self, now: float, current: int, depth: int, busy: float) -> int:
        """The desired count bounded by the step limit, min, max and the cooldown."""
        cfg = self.cfg
        want = self.desired(current, depth, busy)
        if cfg.step_limit is not None:
            want = max(current - cfg.step_limit, min(current + cfg.step_limit, want))
        want = max(cfg.min, min(cfg.max, want))
        if want < current and now < self.changed_at + cfg.cooldown:
            want = current
        if want != current:
            self.changed_at = now
        return want

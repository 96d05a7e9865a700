"""The autoscaler's decision, KEDA's and the HPA's formulas: pure, no SimPy.

KEDA's queue scalers hand the HPA an ``AverageValue`` target, so the replicas it asks for
are ``ceil(queue length / target)``; the HPA's utilisation formula is
``ceil(current × utilisation / target)``. Either is then bounded by the step limit (workers
added or removed per decision), by ``min`` and ``max``, and scale-in waits ``cooldown``
after the last change.
"""

from __future__ import annotations

import math

EPSILON = 1e-9  # ceil(10 × 0.7 / 0.7) is 11 in floating point without it


class Autoscaler:
    """``decide(now, current, depth, busy)``: how many workers to run from *now* on;
    *cfg* is a scenario's ``workers.autoscale`` (metric, target, min, max, step_limit,
    cooldown)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.changed_at = -math.inf

    def desired(self, current: int, depth: int, busy: float) -> int:
        """The metric's wish, up to ``max`` + 1 (more can never be run): KEDA's
        ceil(depth / target) or the HPA's ceil(current × busy / target), *busy* the
        fraction of workers holding a job. (A tiny target makes the ratio infinite.)"""
        cfg = self.cfg
        ratio = (depth if cfg.metric == "queue_depth" else current * busy) / cfg.target
        return math.ceil(min(ratio - EPSILON, cfg.max + 1.0))

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

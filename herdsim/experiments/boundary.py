"""``herdsim boundary``: the value of a setting at which the chance of recovering crosses
one half, found instead of swept.

Recovering means the run's state is not ``metastable`` (it recovered, perhaps slowly:
``recovered`` or ``degraded``, the sweep map's classes). The search:

1. **the fluid model's answer**: :func:`herdsim.results.predicted.predict` over a log
   grid of the range (well under a second a point): the first value whose state turns
   metastable (or the range's middle when it never turns);
2. **a sequential logistic fit** on replicated simulations: a first batch of runs at and
   around the fluid's answer, then, while the 95% interval of the crossing is wider than
   asked and the simulation budget lasts, a batch at each end of the interval. The fit is
   P(recover | x) = 1 / (1 + exp(-(a + b·z))), z the value standardised, by maximum
   likelihood with a weak normal prior on b (sd 10 in standard units: it keeps the fit
   finite when the runs are still separated); the interval is the delta method's on
   x50 = mean - a/b · sd.

Simulations run through the sweep's pool or Dask scheduler
(:func:`~herdsim.experiments.parallel.imap_unordered` of the sweep's
:func:`~herdsim.experiments.sweep.run_task`) and the work estimate checks every batch.
Two paths trace the curve: the first path's boundary at each of several values of the
second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from herdsim.config.loading import load_scenario
from herdsim.config.overrides import apply_overrides
from herdsim.config.scenario import Scenario
from herdsim.config.schema import value_at
from herdsim.errors import ScenarioError, UsageError
from herdsim.experiments.parallel import imap_unordered
from herdsim.experiments.sweep import Task, run_task
from herdsim.planning import estimate
from herdsim.results.predicted import predict

REPLICATIONS = 4  # runs per design point in a batch
MAX_SIMULATIONS = 40  # a fifth of a 20-point x 10-replication sweep
FLUID_POINTS = 24
PRIOR_SD = 10.0  # the slope's prior, in standard units
Z95 = 1.959963984540054


@dataclass
class Boundary:
    """Where P(recover) crosses 1/2 along ``path``: ``value`` and its 95% interval
    (``low``, ``high``), the ``fluid`` model's answer, the ``runs`` (``x``, ``recovered``)
    and whether it recovers ``below`` the value (else above)."""

    path: str
    value: float
    low: float
    high: float
    fluid: float | None
    below: bool
    runs: pd.DataFrame
    scenario: Scenario
    current: float
    extra: dict = field(default_factory=dict)

    @property
    def simulations(self) -> int:
        """Simulations the search took."""
        return len(self.runs)

    def plot(self):
        """The safe-operating figure (a matplotlib Figure): the runs, the edge and its
        interval, today's setting and the margin."""
        from herdsim.plots.boundary import safe_operating

        return safe_operating(self.path, self.value, self.low, self.high, self.current,
                              self.below, self.runs, self.scenario.name)

    def text(self) -> str:
        """``recovers from downstream.outages.0.duration up to 3.2 (95% CI 2.9–3.5) ...``"""
        side = "up to" if self.below else "from"
        at = f" at {self.scenario.workload.rate:g} jobs/s" if self.path != "workload.rate" \
            else ""
        fluid = "n/a" if self.fluid is None else f"{self.fluid:.4g}"
        return (f"recovers with {self.path} {side} {self.value:.4g} (95% CI {self.low:.4g}–"
                f"{self.high:.4g}){at}; today's setting {self.current:.4g}; the fluid model "
                f"said {fluid}; {self.simulations} simulations")


def boundary(scenario: Scenario | str | Path, find: list[str] | str,
             span: tuple[float, float] | None = None, replications: int = REPLICATIONS,
             max_simulations: int = MAX_SIMULATIONS, precision: float = 0.1,
             processes: int | None = None, scheduler: str | None = None,
             force: bool = False, label: str | None = None) -> Boundary | list[Boundary]:
    """The boundary of *scenario* along ``find[0]`` (see the module docstring); with a
    second path, a list: the first path's boundary at 5 values of the second, from half
    to twice today's. *span* is the first path's range searched (default: a tenth to
    four times today's value); each search stops when the interval is narrower than
    *precision* × the value or after *max_simulations*."""
    base = load_scenario(scenario) if isinstance(scenario, (str, Path)) else scenario
    paths = [find] if isinstance(find, str) else list(find)
    if not 1 <= len(paths) <= 2:
        raise UsageError(f"--find: give one or two paths, got {len(paths)}")
    for path in paths:
        _current(base, path)
    # the whole search's bound, before anything runs: every boundary at its budget
    estimate.check([base], processes or 1, force, max_simulations * (5 if len(paths) == 2
                                                                       else 1))
    if len(paths) == 2:
        current = _current(base, paths[1])
        values = np.geomspace(current / 2, current * 2, 5)
        return [_search(_with(base, {paths[1]: _typed(base, paths[1], v)}), paths[0], span,
                        replications, max_simulations, precision, processes, scheduler,
                        force, label) for v in values]
    return _search(base, paths[0], span, replications, max_simulations, precision,
                   processes, scheduler, force, label)


def _search(base: Scenario, path: str, span: tuple[float, float] | None, replications: int,
            max_simulations: int, precision: float, processes: int | None,
            scheduler: str | None, force: bool, label: str | None) -> Boundary:
    """One path's boundary (see :func:`boundary`)."""
    current = _current(base, path)
    lo, hi = span if span is not None else (current / 10, current * 4)
    if not 0 < lo < hi:
        raise UsageError(f"--range {lo:g}:{hi:g}: expected 0 < low < high")
    fluid, below = fluid_crossing(base, path, lo, hi)
    start = fluid if fluid is not None else math.sqrt(lo * hi)
    runs = pd.DataFrame({"x": pd.Series(dtype=float), "recovered": pd.Series(dtype=float)})
    points = [start * 0.8, start, start * 1.25]
    value, low, high = start, lo, hi
    seed = 0
    while len(runs) + replications * len(points) <= max_simulations:
        points = [min(max(_typed(base, path, p), lo), hi) for p in points]
        runs = pd.concat([runs, simulate(base, path, points, replications, seed, processes,
                                         scheduler, force, label)], ignore_index=True)
        seed += replications
        value, low, high, below = fit(runs, below)
        if high - low <= precision * value:
            break
        points = _next(runs, value, low, high, lo, hi, below)
    return Boundary(path, value, low, high, fluid, below, runs, base, current)


def fluid_crossing(base: Scenario, path: str, lo: float, hi: float
                   ) -> tuple[float | None, bool]:
    """The fluid model's first value in [lo, hi] (log grid) whose state differs from the
    range's low end, and whether the low end recovers; None when it never changes (or
    the fluid model refuses the scenario)."""
    values = np.geomspace(lo, hi, FLUID_POINTS)
    try:
        states = [predict(_with(base, {path: _typed(base, path, v)})).summary["state"]
                  for v in values]
    except ScenarioError:
        return None, True
    recovers = [s != "metastable" for s in states]
    for v, r in zip(values[1:], recovers[1:], strict=True):
        if r != recovers[0]:
            return float(v), recovers[0]
    return None, recovers[0]


def simulate(base: Scenario, path: str, points: list[float], replications: int, seed: int,
             processes: int | None, scheduler: str | None, force: bool,
             label: str | None) -> pd.DataFrame:
    """*replications* runs at each of *points* (seeds base + seed + r), through the pool."""
    tasks, built = [], []
    for i, x in enumerate(points):
        for r in range(replications):
            data = apply_overrides(base.to_dict(), {path: x, "seed": base.seed + seed + r})
            built.append(Scenario.model_validate(data))
            tasks.append(Task(f"b{i:03d}-r{seed + r:04d}", i, seed + r, {path: x}, data,
                              force))
    estimate.check(built, processes or 1, force)
    rows = [{"x": float(tasks[index].keys[path]),
             "recovered": float(result["state"] != "metastable")}
            for index, result in imap_unordered(run_task, tasks, processes, label=label,
                                                scheduler=scheduler)]
    return pd.DataFrame(rows)


def fit(runs: pd.DataFrame, below: bool) -> tuple[float, float, float, bool]:
    """The crossing x50, its 95% interval and whether recovering lies below it."""
    x = runs["x"].to_numpy(float)
    y = runs["recovered"].to_numpy(float)
    mean, sd = x.mean(), x.std() or max(abs(x.mean()), 1.0) * 0.1
    z = (x - mean) / sd
    design = np.column_stack([np.ones_like(z), z])
    beta = np.zeros(2)
    penalty = np.diag([0.0, 1.0 / PRIOR_SD**2])
    for _ in range(50):  # Newton on the penalised log-likelihood
        p = 1.0 / (1.0 + np.exp(-design @ beta))
        gradient = design.T @ (y - p) - penalty @ beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    a, b = beta
    if abs(b) < 1e-9:
        return float(mean), float(x.min()), float(x.max()), below
    cov = np.linalg.inv(hessian)
    z50 = -a / b
    grad = np.array([-1.0 / b, a / b**2])
    half = Z95 * math.sqrt(max(float(grad @ cov @ grad), 0.0))
    value = mean + z50 * sd
    return float(value), float(value - half * sd), float(value + half * sd), bool(b < 0)


def _next(runs: pd.DataFrame, value: float, low: float, high: float, lo: float, hi: float,
          below: bool) -> list[float]:
    """The next batch's points: the interval's ends and the crossing, or, while every run
    fell on one side, a step out past the runs toward the other (*below*: recovering lies
    below the crossing)."""
    seen = runs["recovered"]
    if seen.min() == seen.max():
        up = (seen.iloc[0] == 1) == below  # all recover below it: it lies above
        outward = runs["x"].max() * 1.5 if up else runs["x"].min() / 1.5
        return [min(max(outward, lo), hi)]
    return [min(max(low, lo), hi), min(max(value, lo), hi), min(max(high, lo), hi)]


def _current(base: Scenario, path: str) -> float:
    try:
        value = value_at(base, path)
    except (AttributeError, IndexError, KeyError, TypeError):
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"--find {path}: not a numeric setting of this scenario")
    return float(value)


def _typed(base: Scenario, path: str, value: float) -> Any:
    """*value* as the setting's type: a whole number for an integer setting."""
    return int(round(value)) if isinstance(value_at(base, path), int) else float(value)


def _with(base: Scenario, changes: dict) -> Scenario:
    return Scenario.model_validate(apply_overrides(base.to_dict(), changes))

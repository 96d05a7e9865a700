"""``herdsim boundary``: the value of a setting at which the chance of recovering crosses
one half, found instead of swept.

Recovering means the run's state is not ``metastable`` (it recovered, perhaps slowly:
``recovered`` or ``degraded``, the sweep map's classes). The search:

1. **the fluid model's answer**: :func:`herdsim.results.predicted.predict` over a log
   grid of the range (well under a second a point): the first value whose state turns
   metastable (or the range's middle when it never turns), reported with the grid value
   before it (``fluid_from``: the fluid's resolution);
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from herdsim.config.loading import load_scenario
from herdsim.config.messages import problems
from herdsim.config.overrides import apply_overrides
from herdsim.config.scenario import Scenario
from herdsim.config.schema import value_at
from herdsim.errors import ScenarioError, UsageError
from herdsim.experiments.parallel import imap_unordered
from herdsim.experiments.sweep import Task, run_task, unit_of
from herdsim.planning import estimate
from herdsim.results.predicted import predict

REPLICATIONS = 4  # runs per design point in a batch
FIRST_BATCH = 3  # design points of the first batch: 0.8x, 1x and 1.25x the fluid's answer
ALONG = 5  # values of the second path the curve is traced at
MAX_SIMULATIONS = 40  # a fifth of a 20-point x 10-replication sweep
FLUID_POINTS = 24
PRIOR_SD = 10.0  # the slope's prior, in standard units
Z95 = 1.959963984540054


@dataclass
class Boundary:
    """Where P(recover) crosses 1/2 along ``path``: ``value`` and its 95% interval
    (``low``, ``high``), the ``fluid`` model's answer (the first value of its grid where
    the state turned; ``fluid_from``: the one before), the ``runs`` (``x``,
    ``recovered``) and whether it recovers ``below`` the value (else above)."""

    path: str
    value: float
    low: float
    high: float
    fluid: float | None
    below: bool
    runs: pd.DataFrame
    scenario: Scenario
    current: float
    fluid_from: float | None = None  # the fluid's grid value before ``fluid``: its step

    @property
    def simulations(self) -> int:
        """Simulations the search took."""
        return len(self.runs)

    @property
    def unit(self) -> str:
        """The setting's unit: ``s`` for a duration, else none."""
        return unit_of(self.path) or ""

    def probability(self, x: Any) -> np.ndarray:
        """The fitted P(recover | *x*) over every run (:func:`logistic`)."""
        return logistic(self.runs)(x)

    def __repr__(self) -> str:
        return f"<Boundary: {self.text()}>"

    def plot(self):
        """The safe-operating figure (a matplotlib Figure): the runs, the logistic fit,
        the edge and its interval, the fluid model's answer, today's setting and the
        margin."""
        from herdsim.plots.boundary import safe_operating

        return safe_operating(self, self.scenario.name)

    def text(self) -> str:
        """``recovers with downstream.outages.0.duration up to 3.2 s (95% CI 2.9–3.5 s) at
        700 jobs/s; today's setting 4 s; the fluid model put it between 2.9 and 3.1 s; 36
        simulations`` (the fluid's answer is the step of its grid where the state turns)."""
        from herdsim.plots.boundary import edge_text, number

        at = f" at {self.scenario.workload.rate:g} jobs/s" if self.path != "workload.rate" \
            else ""
        fluid = ("said n/a" if self.fluid is None else
                 f"said {number(self.fluid, self.unit)}" if self.fluid_from is None else
                 f"put it between {self.fluid_from:.4g} and {number(self.fluid, self.unit)}")
        said = edge_text(self).replace("recovers ", f"recovers with {self.path} ", 1)
        return (f"{said}{at}; today's setting {number(self.current, self.unit)}; the fluid "
                f"model {fluid}; {self.simulations} simulations")


@dataclass
class Curve:
    """The boundary curve of two settings: the :class:`Boundary` along ``path`` at each
    value of ``along`` in ``values`` (a list of them: ``curve[i]``, ``len(curve)``, a
    loop)."""

    path: str
    along: str
    values: list[float]
    edges: list[Boundary]
    scenario: Scenario

    def __repr__(self) -> str:
        return (f"<Curve: the edge along {self.path} at {len(self)} values of {self.along}, "
                f"{self.simulations} simulations>")

    def __iter__(self) -> Iterator[Boundary]:
        return iter(self.edges)

    def __len__(self) -> int:
        return len(self.edges)

    def __getitem__(self, index: int) -> Boundary:
        return self.edges[index]

    @property
    def simulations(self) -> int:
        """Simulations the whole curve took."""
        return sum(edge.simulations for edge in self.edges)

    @property
    def points(self) -> list[tuple[float, float, float, float]]:
        """``(along value, edge, low, high)`` per boundary."""
        return [(v, e.value, e.low, e.high) for v, e in zip(self.values, self.edges,
                                                             strict=True)]

    @property
    def unit(self) -> str:
        """The second path's unit: ``s`` for a duration, else none."""
        return unit_of(self.along) or ""

    def text(self) -> str:
        """One line per boundary, ``at downstream.outages.0.duration 2 s: recovers with
        workload.rate up to 470 (95% CI 455–485); ...``, and the simulations in all."""
        from herdsim.plots.boundary import number

        lines = [f"at {self.along} {number(v, self.unit)}: {e.text()}"
                 for v, e in zip(self.values, self.edges, strict=True)]
        return "\n".join([*lines, f"{self.simulations} simulations in all"])

    def plot(self, sweep: str | Path | None = None):
        """The boundary curve (a matplotlib Figure) with today's settings; with *sweep*
        (a sweep directory whose axes are the two paths), drawn over that sweep's map."""
        from herdsim.plots import boundary as figures

        today = (_current(self.scenario, self.along), _current(self.scenario, self.path))
        if sweep is None:
            return figures.curve(self, today, self.scenario.name)
        from herdsim.outputs.sweep_dir import load_sweep
        from herdsim.plots.metastability_map import plot_map

        runs, manifest = load_sweep(sweep)
        axes = {a["path"]: a["values"] for a in manifest["axes"]}
        missing = [p for p in (self.path, self.along) if p not in axes]
        if missing:
            raise UsageError(f"--map {sweep}: {missing[0]} is not one of its axes "
                             f"({', '.join(axes)})")
        if self.scenario.retry.strategy not in manifest["strategies"]:
            raise UsageError(f"--map {sweep}: no panel of the strategy "
                             f"{self.scenario.retry.strategy}")
        return figures.over_map(plot_map(runs, manifest, x=self.along, y=self.path),
                                self.scenario.retry.strategy, axes[self.along],
                                axes[self.path], self.points, today)


def boundary(scenario: Scenario | str | Path, find: list[str] | str,
             span: tuple[float, float] | None = None,
             along: Sequence[float] | None = None, replications: int = REPLICATIONS,
             max_simulations: int = MAX_SIMULATIONS, precision: float = 0.1,
             processes: int | None = None, scheduler: str | None = None,
             force: bool = False, label: str | None = None) -> Boundary | Curve:
    """The boundary of *scenario* along ``find[0]`` (see the module docstring); with a
    second path, the :class:`Curve`: the first path's boundary at each value of the second
    in *along* (default: 5 from half to twice today's). *span* is the first path's range
    searched (default: a tenth to four times today's value); each search stops when the
    interval is narrower than *precision* × the value or after *max_simulations*.

    Everything is checked before anything runs, each problem one
    :class:`~herdsim.errors.UsageError` line naming the option: the paths (numeric
    settings, two different ones at most), the range (0 < LOW < HIGH, holding two whole
    numbers for an integer setting, a valid scenario at both ends and every value of the
    second path), the budget (room for the first batch) and the whole search's work (every
    boundary at its budget at the range's heavier end: the one work estimate)."""
    base = load_scenario(scenario) if isinstance(scenario, (str, Path)) else scenario
    paths = [find] if isinstance(find, str) else list(find)
    if not 1 <= len(paths) <= 2:
        raise UsageError(f"--find: give one or two paths, got {len(paths)}")
    if len(set(paths)) < len(paths):
        raise UsageError(f"--find {paths[0]}: given twice; the boundary curve needs two "
                         "different paths")
    if "seed" in paths:
        raise UsageError("--find seed: the seed is the search's own (one per replication), "
                         "not a setting to search")
    first = FIRST_BATCH * replications
    if max_simulations < first:
        raise UsageError(f"--max-simulations {max_simulations}: the first batch alone takes "
                         f"{first} ({FIRST_BATCH} values x {replications} runs)")
    for path in paths:
        _current(base, path)
    bases = ([base] if len(paths) == 1 else
             [_valid(base, paths[1], v, f"--find {paths[1]}", "a value the curve is traced at")
              for v in _along(base, paths[1], along)])
    lo, hi = _range(base, paths[0], span)
    ends = [_valid(b, paths[0], x, f"--range {lo:g}:{hi:g}", "its end") for b in bases
            for x in (lo, hi)]
    heavier = [max(pair, key=lambda s: estimate.estimate(s).most_work)
               for pair in zip(ends[::2], ends[1::2], strict=True)]
    estimate.check(heavier, processes or 1, force, max_simulations)
    found = [_search(b, paths[0], (lo, hi), replications, max_simulations, precision,
                     processes, scheduler, force, label) for b in bases]
    if len(paths) == 1:
        return found[0]
    return Curve(paths[0], paths[1], [_current(b, paths[1]) for b in bases], found, base)


def _search(base: Scenario, path: str, span: tuple[float, float], replications: int,
            max_simulations: int, precision: float, processes: int | None,
            scheduler: str | None, force: bool, label: str | None) -> Boundary:
    """One path's boundary over *span* (checked; see :func:`boundary`)."""
    current = _current(base, path)
    lo, hi = span
    fluid, below = fluid_crossing(base, path, lo, hi)
    start = fluid if fluid is not None else math.sqrt(lo * hi)
    step = (hi / lo) ** (1 / (FLUID_POINTS - 1))  # the fluid grid's ratio
    fluid_from = None if fluid is None else _typed(base, path, fluid / step)
    runs = pd.DataFrame({"x": pd.Series(dtype=float), "recovered": pd.Series(dtype=float)})
    points = [start * 0.8, start, start * 1.25]
    value, low, high = start, lo, hi
    seed = 0
    while len(runs) + replications * len(points) <= max_simulations:
        points = [_typed(base, path, min(max(p, lo), hi)) for p in points]
        runs = pd.concat([runs, simulate(base, path, points, replications, seed, processes,
                                         scheduler, force, label)], ignore_index=True)
        seed += replications
        value, low, high, below = fit(runs, below)
        if high - low <= precision * value:
            break
        points = _next(runs, value, low, high, lo, hi, below)
    return Boundary(path, value, low, high, fluid, below, runs, base, current, fluid_from)


def spread(values: Sequence[float], n: int = ALONG) -> list[float]:
    """*n* values from the smallest of *values* to the largest: geometric when they are
    (all positive, a constant ratio), else even steps (a sweep axis's span, for the
    curve drawn over its map)."""
    grid = np.sort(np.asarray(values, dtype=float))
    ratios = grid[1:] / grid[:-1] if (grid > 0).all() and grid.size > 2 else np.array([])
    geometric = ratios.size > 0 and np.allclose(ratios, ratios[0])
    return (np.geomspace if geometric else np.linspace)(grid[0], grid[-1], n).tolist()


def _along(base: Scenario, path: str, along: Sequence[float] | None) -> list[float]:
    """The second path's values (default: :data:`ALONG` from half to twice today's), as
    the setting's type, each once, in order."""
    if along is None:
        current = _current(base, path)
        if current <= 0:
            raise UsageError(f"--find {path}: today's value is {current:g}; the curve spans "
                             "half to twice it, so it needs a positive one")
        along = np.geomspace(current / 2, current * 2, ALONG).tolist()
    values = sorted({_typed(base, path, v) for v in along})
    if not values or not all(math.isfinite(v) for v in values):
        raise UsageError(f"--find {path}: the curve needs finite values, got {list(along)}")
    return values


def _range(base: Scenario, path: str, span: tuple[float, float] | None
           ) -> tuple[float, float]:
    """The range searched (default: a tenth to four times today's value), checked."""
    if span is None:
        current = _current(base, path)
        if current <= 0:
            raise UsageError(f"--find {path}: today's value is {current:g}, so there is no "
                             "default range (a tenth to four times it); give --range LOW:HIGH")
        span = (current / 10, current * 4)
    lo, hi = (float(v) for v in span)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        raise UsageError(f"--range {lo:g}:{hi:g}: expected 0 < LOW < HIGH, both finite")
    if isinstance(value_at(base, path), int) and _typed(base, path, lo) == \
            _typed(base, path, hi):
        raise UsageError(f"--range {lo:g}:{hi:g}: {path} is a whole number and the range "
                         f"holds one value only ({_typed(base, path, lo)})")
    return lo, hi


def _valid(base: Scenario, path: str, value: float, option: str, what: str) -> Scenario:
    """*base* with *path* at *value* (as its type), or one line naming *option*, the value
    and the first problem of the scenario it makes."""
    typed = _typed(base, path, value)
    try:
        return _with(base, {path: typed})
    except ScenarioError as exc:
        field, problem = exc.problems[0]
        raise UsageError(f"{option}: at {path} = {typed:g} ({what}) the scenario is invalid: "
                         f"{field + ': ' if field else ''}{problem}") from None


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


@dataclass(frozen=True)
class Logistic:
    """The fitted P(recover | x) = 1 / (1 + exp(-(a + b·z))), z = (x - mean) / sd, and the
    covariance of (a, b)."""

    a: float
    b: float
    mean: float
    sd: float
    cov: np.ndarray = field(repr=False)

    def __call__(self, x: Any) -> np.ndarray:
        """P(recover) at *x* (a value or an array)."""
        z = (np.asarray(x, dtype=float) - self.mean) / self.sd
        return 1.0 / (1.0 + np.exp(-(self.a + self.b * z)))


def logistic(runs: pd.DataFrame) -> Logistic:
    """The penalised maximum-likelihood logistic fit of ``recovered`` on ``x`` (Newton's
    method; the slope's weak normal prior keeps a separated batch finite)."""
    x = runs["x"].to_numpy(float)
    y = runs["recovered"].to_numpy(float)
    mean, sd = x.mean(), x.std() or max(abs(x.mean()), 1.0) * 0.1
    design = np.column_stack([np.ones_like(x), (x - mean) / sd])
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
    return Logistic(float(beta[0]), float(beta[1]), float(mean), float(sd),
                    np.linalg.inv(hessian))


def fit(runs: pd.DataFrame, below: bool) -> tuple[float, float, float, bool]:
    """The crossing x50 of :func:`logistic`, its 95% interval (the delta method's) and
    whether recovering lies below it (*below* kept when the fit has no slope)."""
    curve = logistic(runs)
    a, b, mean, sd = curve.a, curve.b, curve.mean, curve.sd
    if abs(b) < 1e-9:
        x = runs["x"]
        return float(mean), float(x.min()), float(x.max()), below
    z50 = -a / b
    grad = np.array([-1.0 / b, a / b**2])
    half = Z95 * math.sqrt(max(float(grad @ curve.cov @ grad), 0.0))
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
    """Today's value of the numeric setting *path*, or one line saying why it is none."""
    try:
        value = value_at(base, path)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise UsageError(f"--find {path}: no such setting in this scenario (herdsim "
                         "validate SCENARIO prints every field)") from None
    if value is None:
        raise UsageError(f"--find {path}: not set in this scenario (null); give it a value "
                         "first with --set")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"--find {path}: not a numeric setting ({str(value)[:40]!r})")
    return float(value)


def _typed(base: Scenario, path: str, value: float) -> Any:
    """*value* as the setting's type: a whole number for an integer setting."""
    return int(round(value)) if isinstance(value_at(base, path), int) else float(value)


def _with(base: Scenario, changes: dict) -> Scenario:
    """*base* with *changes* (path -> value), or a :class:`ScenarioError` naming them."""
    try:
        return Scenario.model_validate(apply_overrides(base.to_dict(), changes))
    except ValidationError as exc:
        raise ScenarioError(problems(exc)) from None

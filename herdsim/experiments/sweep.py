"""Sweeps: one scenario run over a grid of settings x strategies x replications.

``herdsim sweep SCENARIO --grid path=values ... --strategies a,b --replications N --out DIR``
(or ``--presets a,b``, the axis ``retry.preset``, instead of ``--strategies``)

A *cell* is one value of every grid axis. Every cell x strategy x replication is one
independent *task*; replication ``r`` runs with seed ``scenario.seed + r`` in every cell
and under every strategy (common random numbers), so a task's result does not depend on
what runs it or in what order, and any task can be rerun alone with
``herdsim run SCENARIO --set path=value ... --set seed=S``.

Every cell is validated before anything runs. The output directory's layout, and its
writer and reader, are in :mod:`herdsim.outputs.sweep_dir`.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel
from rich.console import Console

from herdsim.analysis import metastability
from herdsim.config import arguments
from herdsim.config.arguments import MAX_GRID_VALUES, MAX_REPLICATIONS, MAX_SWEEP_RUNS
from herdsim.config.loading import load_scenario, validate
from herdsim.config.overrides import apply_overrides
from herdsim.config.scenario import Scenario
from herdsim.config.schema import field_at, is_duration
from herdsim.errors import ScenarioError, SweepError
from herdsim.experiments.design import replication_seed, seeded_data
from herdsim.experiments.parallel import default_processes, imap_unordered
from herdsim.outputs import sweep_dir
from herdsim.planning import estimate
from herdsim.policies.durations import parse_duration
from herdsim.results.result import run
from herdsim.results.sweep_result import SweepResult

RESERVED = {"retry.strategy": "use --strategies to compare strategies"}
PRESET = "retry.preset"
PRESET_ARM = "(retry.preset)"  # the one arm of a sweep over presets: each cell's preset
_INTEGER = re.compile(r"^[-+]?\d+$")


@dataclass(frozen=True)
class Axis:
    """One swept field: its dotted path and the values to try, as given."""

    path: str
    values: tuple[Any, ...]

    @property
    def label(self) -> str:
        return f"{self.path}={','.join(str(v) for v in self.values)}"


def parse_grid(spec: str) -> Axis:
    """``path=v1,v2,...`` (a list) or ``path=start:stop:n[:log]`` (n values, linear or log).

    Range ends are numbers or durations (``250ms:16s:7:log``); whole-number ends give whole
    numbers. List items are parsed later as YAML scalars, like ``--set``.
    """
    path, sep, text = (part.strip() for part in spec.partition("="))
    if not sep or not path or not text:
        raise SweepError(f"--grid {spec!r}: expected path=v1,v2,... or path=start:stop:n[:log]")
    if ":" in text and "," not in text:
        return Axis(path, _range(path, text))
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise SweepError(f"--grid {spec!r}: an empty value in the list")
    if len(set(items)) < len(items):
        raise SweepError(f"--grid {spec!r}: a value is listed twice")
    if len(items) > MAX_GRID_VALUES:
        raise SweepError(f"--grid {path}: {len(items):,} values, at most {MAX_GRID_VALUES:,}")
    return Axis(path, tuple(items))


def _range(path: str, text: str) -> tuple[Any, ...]:
    where = f"--grid {path}={text}"
    parts = text.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
        raise SweepError(f"{where}: a range is start:stop:n or start:stop:n:log")
    if not _INTEGER.match(parts[2]) or int(parts[2]) < 2:
        raise SweepError(f"{where}: n must be a whole number of at least 2, got {parts[2]!r}")
    if int(parts[2]) > MAX_GRID_VALUES:
        raise SweepError(f"{where}: n is at most {MAX_GRID_VALUES:,}, got {parts[2]}")
    (start, start_int), (stop, stop_int) = _endpoint(where, parts[0]), _endpoint(where, parts[1])
    count, log = int(parts[2]), len(parts) == 4 and parts[3] == "log"
    if log and (start <= 0 or stop <= 0):
        raise SweepError(f"{where}: a log range needs positive ends")
    values = (np.geomspace if log else np.linspace)(start, stop, count)
    if start_int and stop_int:
        whole = tuple(int(v) for v in np.round(values))
        if len(set(whole)) < count:
            raise SweepError(f"{where}: {count} whole numbers do not fit between the ends")
        return whole
    return tuple(float(f"{v:.12g}") for v in values)


def _endpoint(where: str, text: str) -> tuple[float, bool]:
    """A range end in plain units (durations in seconds), and whether it is a whole number."""
    try:
        value, whole = (float(text), True) if _INTEGER.match(text) else \
            (parse_duration(text), False)
    except ValueError:
        raise SweepError(f"{where}: {text!r} is neither a number nor a duration") from None
    if not math.isfinite(value):
        raise SweepError(f"{where}: {text[:20]!r} is not a finite number")
    return value, whole


def unit_of(path: str) -> str | None:
    """``"s"`` when the scenario field at *path* (``downstream.outages.0.duration``) is a
    duration, else None."""
    field = field_at(Scenario, path)
    return "s" if field is not None and is_duration(field) else None


@dataclass(frozen=True)
class Task:
    """One run of a sweep: a cell under one strategy with one replication's seed."""

    id: str
    cell: int
    replication: int
    keys: dict[str, Any]
    scenario: dict
    force: bool = False  # run even when the estimate says the machine cannot hold it
    sweep: str = ""  # the digest of the sweep it belongs to (its task file proves it)


def task_name(index: int, task: Task) -> str:
    """``task c00001-a00-r0000 (exponential, workload.rate=40, replication 0)``: a task as
    an error names it (*index* is its place in the run, unused)."""
    settings = ", ".join(f"{path}={value}" for path, value in task.keys.items())
    return (f"task {task.id} ({task.scenario['retry']['strategy']}, "
            f"{settings + ', ' if settings else ''}replication {task.replication})")


def run_task(task: Task) -> dict[str, Any]:
    """Run one task: the run's summary KPIs and its metastability KPIs, then its keys and
    its sweep's digest (an axis such as ``seed`` keeps the cell's value)."""
    result = run(Scenario.model_validate(task.scenario), force=task.force)
    return {**result.summary, **metastability.run_kpis(result), "sweep": task.sweep,
            "task": task.id, "cell": task.cell, "replication": task.replication,
            **task.keys}


@dataclass
class Sweep:
    """A validated plan: base scenario, axes, strategies and replications."""

    source: str
    base: dict
    axes: list[Axis]
    strategies: list[str]
    replications: int
    resolved: list[tuple[Any, ...]]  # per axis, each value as the scenario holds it
    force: bool = False  # not part of what the sweep is: its digest ignores it
    _cells: dict[tuple[int, int], tuple[Scenario, dict[str, Any]]] = field(
        default_factory=dict, repr=False)  # (cell, arm) -> its scenario and keys

    @property
    def n_cells(self) -> int:
        return math.prod(len(axis.values) for axis in self.axes)

    @property
    def n_tasks(self) -> int:
        return self.n_cells * len(self.strategies) * self.replications

    @property
    def name(self) -> str:
        return self.base["name"]

    def cells(self) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
        """``(cell, overrides, keys)`` for every cell: values as given and as resolved."""
        given = itertools.product(*(axis.values for axis in self.axes))
        resolved = itertools.product(*self.resolved)
        paths = [axis.path for axis in self.axes]
        for cell, (values, keys) in enumerate(zip(given, resolved, strict=True)):
            yield cell, dict(zip(paths, values, strict=True)), dict(zip(paths, keys, strict=True))

    def scenario(self, overrides: dict[str, Any], strategy: str) -> Scenario:
        """The validated scenario of one cell under one strategy."""
        data = copy.deepcopy(self.base)
        arm = {} if PRESET in overrides else {"retry.strategy": strategy}
        try:
            apply_overrides(data, {**overrides, **arm})
            return validate(data, self.source)
        except ScenarioError as exc:
            cell = ", ".join(f"{path}={value}" for path, value in overrides.items())
            raise SweepError(f"{exc} (in the cell {cell})" if cell else str(exc)) from None

    def identity(self, cell: int, arm: int, replication: int) -> dict[str, Any]:
        """What the row of task (*cell*, *arm*, *replication*) must say of itself, as this
        plan runs it: the scenario's name, the strategy, the seed (an axis's value, or the
        replication's), and ``max_jobs``, more jobs than its workload can submit (the
        expected arrivals, 10 standard deviations and a burst more). A resumed sweep
        recomputes a task whose file says otherwise (:func:`sweep_dir.finished`)."""
        if (cell, arm) not in self._cells:
            where = np.unravel_index(cell, [len(a.values) for a in self.axes]) \
                if self.axes else ()
            given = {a.path: a.values[i] for a, i in zip(self.axes, where, strict=True)}
            keys = {a.path: values[i] for a, values, i in zip(self.axes, self.resolved, where,
                                                               strict=True)}
            self._cells[(cell, arm)] = (self.scenario(given, self.strategies[arm]), keys)
        scenario, keys = self._cells[(cell, arm)]
        burst = scenario.workload.source().jobs_per_arrival()
        mean = estimate.estimate(scenario).jobs
        return {"scenario": scenario.name, "strategy": scenario.retry.strategy,
                "seed": keys.get("seed", replication_seed(scenario.seed, replication)),
                "max_jobs": mean + 10 * math.sqrt(burst * mean) + 2 * burst + 10}

    def task_id(self, cell: int, arm: int, replication: int) -> str:
        return f"c{cell:05d}-a{arm:02d}-r{replication:04d}"

    def tasks(self, skip: set[str] | frozenset[str] = frozenset()) -> Iterator[Task]:
        """Every task not in *skip*, built lazily (one scenario at a time)."""
        digest = self.manifest()["digest"]
        for cell, overrides, keys in self.cells():
            for arm, strategy in enumerate(self.strategies):
                ids = [self.task_id(cell, arm, r) for r in range(self.replications)]
                if all(task_id in skip for task_id in ids):
                    continue
                data = self.scenario(overrides, strategy).to_dict()
                for replication, task_id in enumerate(ids):
                    if task_id not in skip:
                        yield Task(task_id, cell, replication, keys,
                                   seeded_data(data, replication), self.force, digest)

    def manifest(self) -> dict[str, Any]:
        """What the sweep is, with a digest of everything that changes its results."""
        content = {
            "scenario": self.base,
            "axes": [{"path": a.path, "values": list(v)}
                     for a, v in zip(self.axes, self.resolved, strict=True)],
            "strategies": self.strategies,
            "replications": self.replications,
        }
        digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
        for entry, axis in zip(content["axes"], self.axes, strict=True):  # type: ignore[call-overload]
            entry.update(given=[str(v) for v in axis.values], unit=unit_of(axis.path))
        return {"digest": digest, "herdsim": version("herdsim"), "source": self.source,
                "tasks": self.n_tasks, **content}

    def default_out(self) -> Path:
        """``runs/<name>-sweep-<digest>``: the same command finds the same directory."""
        return Path("runs") / f"{self.name}-sweep-{self.manifest()['digest'][:10]}"


def plan(scenario: str | Path, grid: Sequence[str] = (), strategies: Sequence[str] = (),
         replications: int = 1, sets: dict[str, Any] | None = None,
         presets: Sequence[str] = (), force: bool = False) -> Sweep:
    """Parse and validate a sweep: every cell under every strategy is built before running.

    *presets* is the axis ``retry.preset`` (each preset replaces the fields it controls,
    as ``--set retry.preset`` does); it excludes *strategies*.
    Raises :class:`SweepError` (or :class:`ScenarioError` for the base scenario) naming the
    option, the field and the problem.
    """
    base = load_scenario(scenario, sets)
    axes = [parse_grid(spec) for spec in grid]
    if presets:
        if len(set(presets)) < len(presets):
            raise SweepError(f"--presets {','.join(presets)}: a preset is listed twice")
        axes.append(Axis(PRESET, tuple(presets)))
    if strategies and any(axis.path == PRESET for axis in axes):
        raise SweepError("--strategies and a retry.preset axis: a preset sets the strategy; "
                         "give one of them")
    seen: set[str] = set()
    for axis in axes:
        if axis.path in RESERVED:
            raise SweepError(f"--grid {axis.path}: {RESERVED[axis.path]}")
        if axis.path in seen:
            raise SweepError(f"--grid {axis.path}: given twice")
        if axis.path in (sets or {}):
            raise SweepError(f"--grid {axis.path}: also given with --set; choose one")
        try:
            apply_overrides(base.to_dict(), {axis.path: axis.values[0]})
        except ScenarioError as exc:
            raise SweepError(f"--grid {exc}") from None
        seen.add(axis.path)
    if replications < 1:
        raise SweepError(f"--replications {replications}: must be at least 1")
    if replications > MAX_REPLICATIONS:
        raise SweepError(f"--replications {replications}: at most {MAX_REPLICATIONS:,}")
    arms_n = max(1, len(strategies))
    if math.prod(len(axis.values) for axis in axes) * arms_n > MAX_SWEEP_RUNS:
        raise SweepError(f"--grid: {' x '.join(str(len(a.values)) for a in axes)} cells x "
                         f"{arms_n} strategies: at most {MAX_SWEEP_RUNS:,} (each is built "
                         "and checked before the sweep runs)")
    _seeds_apart([axis for axis in axes if axis.path == "seed"], replications)
    by_preset = any(axis.path == PRESET for axis in axes)
    arms = list(strategies) or [PRESET_ARM if by_preset else base.retry.strategy]
    if len(set(arms)) < len(arms):
        raise SweepError(f"--strategies {','.join(arms)}: a strategy is listed twice")
    sweep = Sweep(str(scenario), base.to_dict(), axes, arms, replications,
                  [tuple(axis.values) for axis in axes], force)
    resolved: list[dict[Any, Any]] = [{} for _ in axes]
    built: list[Scenario] = []
    for _, overrides, _ in sweep.cells():
        for strategy in arms:
            cell = sweep.scenario(overrides, strategy)
            built.append(cell)
        for i, axis in enumerate(axes):
            resolved[i].setdefault(overrides[axis.path], _read(cell, axis.path))
    sweep.resolved = [tuple(r[v] for v in axis.values) for r, axis in zip(resolved, axes,
                                                                          strict=True)]
    for axis, values in zip(axes, sweep.resolved, strict=True):
        if len(set(values)) < len(values):
            raise SweepError(f"--grid {axis.label}: two values mean the same {values}")
    estimate.check(built, default_processes(), force, replications)
    return sweep


def _seeds_apart(axes: list[Axis], replications: int) -> None:
    """Refuse a seed axis whose cells would share runs: replication ``r`` runs seed
    ``seed + r``, so seeds closer than *replications* overlap."""
    for axis in axes:
        try:
            seeds = sorted(int(str(value)) for value in axis.values)
        except ValueError:
            return  # not whole numbers: the scenario's validation names it
        close = [(a, b) for a, b in zip(seeds, seeds[1:], strict=False) if b - a < replications]
        if close:
            a, b = close[0]
            raise SweepError(
                f"--grid {axis.label} with --replications {replications}: replication r "
                f"runs seed + r, so the cells seed={a} and seed={b} would share runs; space "
                f"the seeds at least {replications} apart, or use one cell and "
                "--replications")


def _read(scenario: Scenario, path: str) -> Any:
    node: Any = scenario
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    if isinstance(node, (BaseModel, list, dict)):
        raise SweepError(f"--grid {path}: names a section or a list; sweep one of its fields")
    return node


def run_sweep(sweep: Sweep, out: str | Path | None = None, processes: int | None = None,
              scheduler: str | None = None, progress: bool = True) -> Path:
    """Run every task of *sweep* not yet in *out*, then write the combined tables.

    Tasks go to ``processes`` local processes (default: every core; 1 = in this process)
    or to a Dask cluster (``scheduler``: ``"local"`` or ``tcp://host:8786``). Each result
    is written as it arrives, so an interrupted sweep resumes where it stopped. A task that
    raises stops the others and raises :class:`~herdsim.errors.TaskError` naming it and
    the cause; the tasks finished before stay written.
    """
    out = Path(out) if out is not None else sweep.default_out()
    fresh = not (out / sweep_dir.MANIFEST).exists()
    sweep_dir.prepare(out, sweep.manifest(), Scenario.model_validate(sweep.base).to_yaml())
    done = sweep_dir.finished(out, sweep.identity)
    redo = sweep_dir.refused(out, sweep.identity)
    if redo and progress:
        Console(stderr=True, highlight=False).print(
            f"{out}: {len(redo)} task file(s) do not prove their task and are recomputed "
            f"(first: {redo[0][0]}: {redo[0][1]})", markup=False, soft_wrap=True)
    todo = sweep.n_tasks - len(done)
    label = f"{sweep.name}: {todo} tasks" if progress else None
    results = imap_unordered(run_task, sweep.tasks(done), processes, label, scheduler,
                             total=todo, name=task_name)
    try:
        for _, row in results:
            sweep_dir.write_task(out, row)
    except BaseException:
        if fresh and not sweep_dir.finished(out):  # nothing to resume: leave nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    sweep_dir.combine(out, sweep.identity)
    return out




def sweep(scenario: str | Path, grid: Sequence[str] = (), strategies: Sequence[str] = (),
          replications: int = 1, *, out: str | Path | None = None,
          sets: dict[str, Any] | None = None, presets: Sequence[str] = (),
          processes: int | None = None, scheduler: str | None = None,
          progress: bool = False, force: bool = False) -> SweepResult:
    """Run *scenario* over *grid* (``"path=v1,v2"`` or ``"path=start:stop:n[:log]"``) x
    *strategies* (or *presets*) x *replications*, as ``herdsim sweep`` does, and return
    the finished sweep (:class:`~herdsim.results.sweep_result.SweepResult`). *out*
    (default ``runs/<name>-sweep-<digest>``) holds it; the same call resumes it. A wrong
    argument is a :class:`~herdsim.errors.UsageError` naming it."""
    scenario = arguments.path("scenario", scenario)
    grid = arguments.texts("grid", grid)
    strategies = arguments.names("strategies", strategies or None) or []
    replications = arguments.whole("replications", replications)  # type: ignore[assignment]
    out = None if out is None else arguments.path("out", out)
    sets = arguments.mapping("sets", sets)
    presets = arguments.names("presets", presets or None) or []
    processes = arguments.whole("processes", processes, optional=True)
    scheduler = arguments.text("scheduler", scheduler, optional=True)
    progress, force = arguments.flag("progress", progress), arguments.flag("force", force)
    planned = plan(scenario, grid, strategies, replications, sets, presets, force)
    target = Path(out) if out is not None else planned.default_out()
    sweep_dir.check(target, planned.manifest())
    run_sweep(planned, target, processes, scheduler, progress=progress)
    runs, manifest = sweep_dir.load_sweep(target)
    return SweepResult(runs, manifest, target)

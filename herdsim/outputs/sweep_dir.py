"""Sweep directories: one writer and one validating reader.

``herdsim sweep ... --out DIR`` writes:

- ``manifest.json``: what the sweep is (resolved base scenario, axes, strategies,
  replications) and its ``digest``; a rerun with another digest is refused.
- ``scenario.yaml``: the resolved base scenario.
- ``tasks/<task>.json``: one per finished task, written atomically as it finishes: the
  sweep's ``digest`` (as ``sweep``), the task's keys (``task``, ``cell``, ``replication``,
  one column per axis), its summary KPIs and the metastability KPIs. A rerun skips the
  tasks whose file proves its sweep, its cell (the axis values of that cell), its
  identity (the scenario, strategy and seed the sweep's plan runs there) and a
  consistent result (a summary the KPI registry accepts, whose outcomes add up to the
  jobs submitted, no more than the workload can submit); any other file is redone.
- ``sweep.parquet`` and ``sweep.csv``: every task's row, by cell, strategy, replication.
- ``checksums.json``: the SHA-256 of the top-level files, sealed when the folder is made
  and again when the tables are written; readers check the manifest and the tables
  against it, as they check a run's files.
- ``map.<format>``: the metastability map, when asked for.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis import metastability
from herdsim.config import files
from herdsim.errors import OutputDirError, OutputExistsError, SweepError
from herdsim.outputs import reading
from herdsim.outputs.atomic import claim, inside, seal, staging_dir, verify, write_file
from herdsim.plots.metastability_map import plot_map
from herdsim.plots.style import save_figure

MANIFEST = "manifest.json"
RESULT = ("strategy", "seed", "state", "succeeded_fraction", "goodput", "recovery_time",
          "collapses_after_outage", "latency_censored", "jobs_submitted",
          "load", "outage_seconds", "goodput_tail")  # what every task's row must hold
TASKS = "tasks"
TABLES = ("sweep.parquet", "sweep.csv")


def check(out: Path, manifest: dict[str, Any]) -> None:
    """Raise :class:`SweepError` unless *out* is free or holds the sweep of *manifest*."""
    if os.path.lexists(out / MANIFEST):
        old = _manifest(out)
        if old.get("digest") != manifest["digest"]:
            raise SweepError(
                f"{out}: holds another sweep (its scenario, grid, strategies or replications "
                "differ); choose a new --out, or remove it to start over")
        tasks = out / TASKS
        if tasks.is_symlink() or not tasks.is_dir():
            raise SweepError(f"{tasks}: not the sweep's own folder (a link or missing); "
                             f"remove {out} to start over")
    elif os.path.lexists(out) and (not out.is_dir() or any(out.iterdir())):
        raise SweepError(f"{out}: exists and is not a sweep directory; choose another --out")


def prepare(out: Path, manifest: dict[str, Any], scenario_yaml: str) -> None:
    """Create *out* for the sweep of *manifest*, or check that it already holds it."""
    check(out, manifest)
    if (out / MANIFEST).exists():
        return
    with staging_dir(out.parent, out.name) as holder:
        staging = holder / out.name
        (staging / TASKS).mkdir(parents=True)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (staging / "scenario.yaml").write_text(scenario_yaml)
        seal(staging)
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # an empty folder made for the sweep: its place is free
        if not claim(staging, out):
            raise OutputExistsError(f"{out}: another process created it meanwhile; rerun "
                                    "the same command to resume it")


def _manifest(out: Path) -> dict[str, Any]:
    try:
        verify(out, MANIFEST)
        manifest = json.loads(files.read_bytes(out / MANIFEST).decode("utf-8"))
    except OutputDirError as exc:
        raise SweepError(str(exc)) from None
    except OSError as exc:
        raise SweepError(f"{out / MANIFEST}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError):
        raise SweepError(f"{out / MANIFEST}: damaged (not JSON); remove {out} to start "
                         "over") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("digest"), str) \
            or not _axes_ok(manifest.get("axes")) \
            or not isinstance(manifest.get("strategies"), list):
        raise SweepError(f"{out / MANIFEST}: not a herdsim sweep manifest (no digest, axes "
                         "or strategies)")
    return manifest


def _axes_ok(axes: object) -> bool:
    return isinstance(axes, list) and all(
        isinstance(a, dict) and isinstance(a.get("path"), str)
        and isinstance(a.get("values"), list) and a["values"] for a in axes)


Expect = Callable[[int, int, int], dict[str, Any]]  # (cell, arm, replication) -> identity
OUTCOMES = ("jobs_succeeded", "jobs_dead_lettered", "jobs_pending", "jobs_merged")


def _task(path: Path, manifest: dict[str, Any], expect: Expect | None = None
          ) -> dict[str, Any] | None:
    """A task file's row when it proves its task (see :func:`_problem`); None otherwise
    (the task is then rerun)."""
    row, problem = _read_task(path, manifest, expect)
    return None if problem else row


def _read_task(path: Path, manifest: dict[str, Any], expect: Expect | None
               ) -> tuple[dict[str, Any] | None, str | None]:
    try:
        row = json.loads(files.read_bytes(path, 1 << 20).decode("utf-8"),
                         parse_constant=reading.no_constant)
        cell, arm, replication = (int(part[1:]) for part in path.stem.split("-"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None, "unreadable, or not a task's file name"
    return row, _problem(row, path.stem, (cell, arm, replication), manifest, expect)


def _problem(row: Any, name: str, task: tuple[int, int, int], manifest: dict[str, Any],
             expect: Expect | None) -> str | None:
    """Why a task file's *row* does not prove task *name*, or None. It must carry this
    sweep's digest, the cell, arm and replication its name says with that cell's axis
    values, and a valid summary whose outcomes add up (succeeded, dead-lettered, pending
    and merged jobs make the jobs submitted; the succeeded fraction is theirs); with
    *expect* (the sweep's own plan: :meth:`~herdsim.experiments.sweep.Sweep.identity`),
    the scenario's name, the strategy and the seed that task runs, and at most the jobs
    its workload can submit."""
    cell, arm, replication = task
    axes = manifest["axes"]
    shape = [len(axis["values"]) for axis in axes]
    if not (isinstance(row, dict) and row.get("task") == name
            and row.get("sweep") == manifest["digest"] and row.get("cell") == cell
            and row.get("replication") == replication and cell < max(1, int(np.prod(shape)))
            and arm < len(manifest["strategies"])
            and replication < manifest.get("replications", 1)
            and all(key in row for key in RESULT)):
        return "not this sweep's task (its digest, cell, arm or replication)"
    problem = reading.summary_problem(row)
    if problem:
        return problem
    where = np.unravel_index(cell, shape) if shape else ()
    if any(row.get(axis["path"]) != axis["values"][i] for axis, i in zip(axes, where,
                                                                          strict=True)):
        return "its axis values are not its cell's"
    outcomes = sum(row.get(key) or 0 for key in OUTCOMES)
    submitted = row["jobs_submitted"]
    if outcomes != submitted:
        return f"its outcomes add up to {outcomes:,} jobs, not the {submitted:,} submitted"
    fraction = row["succeeded_fraction"]
    if (fraction is None) != (submitted == 0) or submitted and not math.isclose(
            fraction, row["jobs_succeeded"] / submitted, rel_tol=1e-9):
        return "its succeeded fraction is not its jobs succeeded over submitted"
    identity = dict(expect(cell, arm, replication)) if expect is not None else {}
    most = identity.pop("max_jobs", math.inf)
    for key, value in identity.items():
        if row.get(key) != value:
            return f"{key} {row.get(key)!r}, where this task runs {value!r}"
    if submitted > most:
        return f"{submitted:,} jobs submitted, more than its workload can submit ({most:,.0f})"
    return None


def _tasks(out: Path, manifest: dict[str, Any], expect: Expect | None = None
           ) -> dict[str, dict[str, Any]]:
    """The proven task rows of *out* by task id."""
    folder = out / TASKS
    if folder.is_symlink() or not folder.is_dir():
        return {}
    rows = {path.stem: _task(path, manifest, expect) for path in sorted(folder.glob("c*.json"))}
    return {task: row for task, row in rows.items() if row is not None}


def finished(out: str | Path, expect: Expect | None = None) -> set[str]:
    """The ids of the tasks whose results are in *out* (none when it holds no sweep yet);
    a task file that does not prove its task does not count, so the next run redoes it
    (*expect*: see :func:`_problem`)."""
    out = Path(out)
    if not os.path.lexists(out / MANIFEST):
        return set()
    return set(_tasks(out, _manifest(out), expect))


def refused(out: str | Path, expect: Expect | None = None) -> list[tuple[str, str]]:
    """``(task file, why)`` for each task file in *out* that does not prove its task."""
    out = Path(out)
    folder = out / TASKS
    if not os.path.lexists(out / MANIFEST) or folder.is_symlink() or not folder.is_dir():
        return []
    manifest = _manifest(out)
    found = ((path, _read_task(path, manifest, expect)[1])
             for path in sorted(folder.glob("c*.json")))
    return [(f"{TASKS}/{path.name}", problem) for path, problem in found if problem]


def write_task(out: Path, row: dict[str, Any]) -> None:
    """Write one finished task's row, never through a link out of *out*."""
    path = out / TASKS / f"{row['task']}.json"
    inside(out, path)
    write_file(path, json.dumps(row) + "\n", root=out)


def combine(out: Path, expect: Expect | None = None) -> pd.DataFrame:
    """Gather the task files of *out* that prove their task (*expect*: see
    :func:`_problem`) into ``sweep.parquet`` and ``sweep.csv``, and seal."""
    frame = pd.DataFrame(list(_tasks(out, _manifest(out), expect).values()))
    write_file(out / TABLES[0], frame, lambda f, path: f.to_parquet(path, index=False))
    write_file(out / TABLES[1], frame, lambda f, path: f.to_csv(path, index=False))
    verify(out, "scenario.yaml")
    seal(out)
    return frame


def load_sweep(out: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The combined table and the manifest of the sweep directory *out*, both checked
    against ``checksums.json``."""
    out = Path(out)
    if not (out / MANIFEST).exists():
        raise SweepError(f"{out}: not a sweep directory (no {MANIFEST})")
    manifest = _manifest(out)
    if not (out / TABLES[0]).exists():
        done = len(finished(out))
        raise SweepError(f"{out}: the sweep has not finished ({done} of "
                         f"{manifest.get('tasks', '?')} tasks); rerun the same sweep command "
                         "to complete it")
    try:
        verify(out, TABLES[0])
        with open(files.open_regular(out / TABLES[0]), "rb") as stream:
            table = pd.read_parquet(stream)
    except OutputDirError as exc:
        raise SweepError(str(exc)) from None
    except Exception as exc:  # pyarrow raises its own types for a damaged file
        raise SweepError(f"{out / TABLES[0]}: damaged ({type(exc).__name__}); rerun the same "
                         "sweep command to rebuild it") from None
    if len(table) != manifest.get("tasks", len(table)):
        raise SweepError(f"{out / TABLES[0]}: {len(table)} rows for "
                         f"{manifest.get('tasks')} tasks; rerun the same sweep command")
    return table, manifest


def class_counts(sweep_dir: str | Path) -> pd.DataFrame:
    """Cells of each class (columns) under each strategy (rows) of a finished sweep."""
    runs, manifest = load_sweep(sweep_dir)
    return metastability.class_counts(runs, [axis["path"] for axis in manifest["axes"]],
                                      manifest["strategies"])


def save_map(sweep_dir: str | Path, formats: list[str] | tuple[str, ...] = ("png",)
             ) -> list[Path]:
    """Draw the map of *sweep_dir* into ``map.<format>`` there (each file replaced whole)."""
    figure = plot_map(*load_sweep(sweep_dir))
    written = []
    for fmt in formats:
        path = Path(sweep_dir) / f"map.{fmt}"
        write_file(path, figure, lambda f, aside, fmt=fmt: save_figure(f, aside, fmt, dpi=110))
        written.append(path)
    return written

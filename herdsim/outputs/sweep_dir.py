"""Sweep directories: one writer and one validating reader.

``herdsim sweep ... --out DIR`` writes:

- ``manifest.json``: what the sweep is (resolved base scenario, axes, strategies,
  replications) and its ``digest``; a rerun with another digest is refused.
- ``scenario.yaml``: the resolved base scenario.
- ``tasks/<task>.json``: one per finished task, written atomically as it finishes: the
  task's keys (``task``, ``cell``, ``replication``, one column per axis), its summary KPIs
  and the metastability KPIs. A rerun skips the tasks already there.
- ``sweep.parquet`` and ``sweep.csv``: every task's row, by cell, strategy, replication.
- ``map.<format>``: the metastability map, when asked for.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from herdsim.analysis import metastability
from herdsim.errors import SweepError
from herdsim.outputs.atomic import write_file
from herdsim.plots.metastability_map import plot_map

MANIFEST = "manifest.json"
TASKS = "tasks"
TABLES = ("sweep.parquet", "sweep.csv")


def check(out: Path, manifest: dict[str, Any]) -> None:
    """Raise :class:`SweepError` unless *out* is free or holds the sweep of *manifest*."""
    if (out / MANIFEST).exists():
        old = _manifest(out)
        if old.get("digest") != manifest["digest"]:
            raise SweepError(
                f"{out}: holds another sweep (its scenario, grid, strategies or replications "
                "differ); choose a new --out, or remove it to start over")
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SweepError(f"{out}: exists and is not a sweep directory; choose another --out")


def prepare(out: Path, manifest: dict[str, Any], scenario_yaml: str) -> None:
    """Create *out* for the sweep of *manifest*, or check that it already holds it."""
    check(out, manifest)
    if (out / MANIFEST).exists():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        (staging / TASKS).mkdir()
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (staging / "scenario.yaml").write_text(scenario_yaml)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _manifest(out: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise SweepError(f"{out / MANIFEST}: damaged (not JSON); remove {out} to start "
                         "over") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("digest"), str):
        raise SweepError(f"{out / MANIFEST}: not a herdsim sweep manifest (no digest)")
    return manifest


def _task(path: Path) -> dict[str, Any] | None:
    """A task file's row, or None when it is empty or damaged (the task is then rerun)."""
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return row if isinstance(row, dict) and row.get("task") == path.stem else None


def finished(out: str | Path) -> set[str]:
    """The ids of the tasks whose results are in *out* (none when it does not exist); an
    empty or damaged task file does not count, so the next run redoes that task."""
    return {path.stem for path in (Path(out) / TASKS).glob("c*.json")
            if _task(path) is not None}


def combine(out: Path) -> pd.DataFrame:
    """Gather the task files of *out* into ``sweep.parquet`` and ``sweep.csv``."""
    rows = [_task(path) for path in sorted((out / TASKS).glob("c*.json"))]
    frame = pd.DataFrame([row for row in rows if row is not None])
    write_file(out / TABLES[0], frame, lambda f, path: f.to_parquet(path, index=False))
    write_file(out / TABLES[1], frame, lambda f, path: f.to_csv(path, index=False))
    return frame


def load_sweep(out: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The combined table and the manifest of the sweep directory *out*."""
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
        table = pd.read_parquet(out / TABLES[0])
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
        write_file(path, figure, lambda fig, aside, fmt=fmt: fig.savefig(aside, dpi=110,
                                                                           format=fmt))
        written.append(path)
    return written

"""Recovered, degraded or metastable? The class of each run and cell of a sweep, and the map.

The rule (also in ``docs/scaling.md``) uses the summary KPIs (``recovery_time``,
``collapses_after_outage``, ``capacity_rate``) and two read off the run here:

- ``load``: offered rate / capacity, rho; ``outage_seconds``: total outage time, d;
- ``goodput_tail``: successes per second over the last 10% of the run (after the last
  outage), over the offered rate of good jobs.

A smooth queue that loses d seconds of service at load rho works off the backlog in
``ideal_drain = d * rho / (1 - rho)`` seconds after the outage (infinite when rho >= 1).

- **recovered**: ``recovery_time`` is defined and at most
  ``max(SLOW_FLOOR, SLOW_FACTOR * ideal_drain)``;
- **metastable**: ``recovery_time`` is undefined (not healthy when the run ends) and the
  trigger's end did not help: the downstream collapsed again after the outage
  (``collapses_after_outage > 0``) or the tail goodput is below ``GOODPUT_FLOOR``;
- **degraded**: the rest: recovered, but slowly; or not yet recovered when the run ends
  while serving at least ``GOODPUT_FLOOR`` of the offered jobs with no new collapse
  (still working through its backlog).

A cell (its replications) takes the class of most of its runs, ties going to the worse
class; its label is the median ``recovery_time`` of its runs that recovered.
A run must last long enough after the outage for "not yet recovered" to mean something.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .durations import format_duration
from .result import Result

CLASSES = ("recovered", "degraded", "metastable")  # from best to worst
SLOW_FACTOR = 2.0  # recovery slower than twice the ideal drain time is degraded
SLOW_FLOOR = 5.0  # s: a recovery within this is never called slow
GOODPUT_FLOOR = 0.5  # tail goodput below half the offered jobs counts as down
TAIL_FRACTION = 0.1  # the tail is the last 10% of the run
COLORS = {  # Okabe & Ito (2008): distinct for colour-blind readers, black text on all
    "recovered": "#56B4E9",  # sky blue
    "degraded": "#F0E442",  # yellow
    "metastable": "#D55E00",  # vermillion
}
HATCH = {"recovered": "", "degraded": "..", "metastable": "//"}


def run_kpis(result: Result) -> dict[str, float | None]:
    """``load``, ``outage_seconds`` and ``goodput_tail`` of one run (see the module doc)."""
    sc = result.scenario
    ts = result.timeseries
    offered = sc.workload.rate * (1 - sc.workload.poison_fraction)
    last_end = max((end for _, end in sc.outage_windows), default=0.0)
    tail = ts["time"].to_numpy() >= max(last_end, sc.duration * (1 - TAIL_FRACTION))
    seconds = tail.sum() * sc.bin
    goodput = float(ts["success"].to_numpy()[tail].sum() / seconds / offered) \
        if seconds > 0 and offered > 0 else None
    return {
        "load": sc.workload.rate / sc.downstream.capacity_rate(),
        "outage_seconds": float(sum(o.duration for o in sc.downstream.outages)),
        "goodput_tail": goodput,
    }


def ideal_drain(load: float, outage_seconds: float) -> float:
    """Seconds a smooth queue at *load* needs to work off *outage_seconds* of backlog."""
    if outage_seconds == 0:
        return 0.0
    return math.inf if load >= 1 else outage_seconds * load / (1 - load)


def classify(runs: pd.DataFrame) -> pd.Series:
    """The class of every run (row) of a sweep table, by the rule of the module doc."""
    recovery = pd.to_numeric(runs["recovery_time"], errors="coerce").to_numpy(dtype=float)
    drain = np.array([ideal_drain(rho, d) for rho, d in
                      zip(runs["load"], runs["outage_seconds"], strict=True)])
    slow_limit = np.maximum(SLOW_FLOOR, SLOW_FACTOR * drain)
    goodput = pd.to_numeric(runs["goodput_tail"], errors="coerce").to_numpy(dtype=float)
    stuck = (runs["collapses_after_outage"].to_numpy() > 0) | ~(goodput >= GOODPUT_FLOOR)
    never = np.isnan(recovery)
    classes = np.where(~never & (recovery <= slow_limit), "recovered",
                       np.where(never & stuck, "metastable", "degraded"))
    return pd.Series(classes, index=runs.index, name="class")


def cells(runs: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """One row per strategy and cell: ``class``, ``runs``, ``agree`` (runs of that class)
    and ``recovery_time`` (median over the runs that recovered; NaN if none did)."""
    frame = runs.assign(**{"class": classify(runs)})
    rows = []
    for key, group in frame.groupby(["strategy", *axes], sort=False, dropna=False):
        counts = group["class"].value_counts()
        worst_first = [c for c in reversed(CLASSES) if c in counts.index]
        winner = max(worst_first, key=lambda c: counts[c])
        recovery = pd.to_numeric(group["recovery_time"], errors="coerce").median()
        rows.append({**dict(zip(["strategy", *axes], key, strict=True)), "class": winner,
                     "runs": len(group), "agree": int(counts[winner]), "recovery_time": recovery})
    return pd.DataFrame(rows)


def plot_map(sweep_dir: str | Path, x: str | None = None, y: str | None = None) -> Figure:
    """The metastability map of a finished sweep: one panel per strategy, a cell per grid
    point coloured by class and labelled with its recovery time.

    *x* and *y* name swept fields (default: the first two axes of the sweep). A sweep with
    more than two axes needs them chosen, and every other axis must have a single value.
    """
    from .sweep import SweepError, load_sweep  # sweep imports this module

    runs, manifest = load_sweep(sweep_dir)
    axes = {a["path"]: a for a in manifest["axes"]}
    if not axes:
        raise SweepError(f"{sweep_dir}: the sweep has no --grid axis to map")
    chosen = [a for a in (x, y) if a is not None] or list(axes)[:2]
    if len(set(chosen)) < len(chosen):
        raise SweepError(f"{sweep_dir}: x and y are the same field ({chosen[0]})")
    for path in chosen:
        if path not in axes:
            raise SweepError(f"{sweep_dir}: {path} is not a swept field ({', '.join(axes)})")
    others = [p for p in axes if p not in chosen and len(axes[p]["values"]) > 1]
    if others:
        raise SweepError(f"{sweep_dir}: the map shows two axes; also swept: "
                         f"{', '.join(others)}")
    table = cells(runs, chosen)
    for path in chosen:
        axes[path]["load"] = _loads(runs, path)
    x_axis = axes[chosen[0]]
    y_axis = axes[chosen[1]] if len(chosen) > 1 else None
    strategies = list(manifest["strategies"])
    n_x = len(x_axis["values"])
    n_y = len(y_axis["values"]) if y_axis else 1
    fig = Figure(figsize=(max(6.0, 0.95 * n_x + 2.2) * len(strategies), 1.0 + 0.75 * n_y + 2.4),
                 layout="constrained")
    panels = fig.subplots(1, len(strategies), sharey=True, squeeze=False)[0]
    for ax, strategy in zip(panels, strategies, strict=True):
        _panel(ax, table[table["strategy"] == strategy], x_axis, y_axis)
        ax.set_title(strategy, fontsize=16, fontweight="bold")
    panels[0].set_ylabel(_axis_label(y_axis) if y_axis else "", fontsize=14)
    reps = manifest["replications"]
    fig.suptitle(f"{manifest['scenario']['name']}: does it recover after the outage?  "
                 f"(label = recovery time; {reps} replication{'s' if reps > 1 else ''} per cell)",
                 fontsize=15)
    fig.legend(handles=_legend(), loc="outside lower center", ncol=3, fontsize=12,
               frameon=False)
    return fig


def _panel(ax, table: pd.DataFrame, x_axis: dict, y_axis: dict | None) -> None:
    xs = list(x_axis["values"])
    ys = list(y_axis["values"]) if y_axis else [None]
    for _, row in table.iterrows():
        i = xs.index(row[x_axis["path"]])
        j = ys.index(row[y_axis["path"]]) if y_axis else 0
        ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor=COLORS[row["class"]],
                               hatch=HATCH[row["class"]], edgecolor="white", linewidth=2))
        ax.text(i, j, _label(row), ha="center", va="center", fontsize=11, color="black",
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.75,
                      "edgecolor": "none"} if HATCH[row["class"]] else None)
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(xs)), [_tick(v, x_axis) for v in xs], fontsize=12)
    ax.set_yticks(range(len(ys)), [_tick(v, y_axis) for v in ys], fontsize=12)
    ax.set_xlabel(_axis_label(x_axis), fontsize=14)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


def _label(row: pd.Series) -> str:
    """The recovery time; ``never`` when metastable, ``not yet`` when still draining."""
    if row["class"] == "metastable":
        text = "never"
    elif np.isnan(row["recovery_time"]):
        text = "not yet"
    else:
        text = f"{row['recovery_time']:.3g} s"
    return text if row["agree"] == row["runs"] else f"{text}\n{row['agree']}/{row['runs']}"


def _legend() -> list[Patch]:
    text = {
        "recovered": "recovered",
        "degraded": "degraded (slow, or still draining)",
        "metastable": "metastable (never recovers)",
    }
    return [Patch(facecolor=COLORS[c], hatch=HATCH[c], edgecolor="0.3", label=text[c])
            for c in CLASSES]


def _tick(value: Any, axis: dict | None) -> str:
    if axis is None:
        return ""
    if axis.get("unit") == "s":
        text = format_duration(float(value))
    else:
        text = f"{value:g}" if isinstance(value, (int, float)) else str(value)
    load = axis.get("load", {}).get(value)
    return text if load is None else f"{text} ({load:.0%})"


def _axis_label(axis: dict) -> str:
    return axis["path"] + (" (% = load)" if axis.get("load") else "")


def _loads(runs: pd.DataFrame, path: str) -> dict[Any, float]:
    """Each value of the swept *path* -> the load it sets, when the axis alone sets it."""
    loads = runs.groupby(path)["load"].agg(["min", "max"])
    if not np.allclose(loads["min"], loads["max"]) or loads["min"].nunique() < 2:
        return {}
    return loads["min"].to_dict()


def class_counts(sweep_dir: str | Path) -> pd.DataFrame:
    """Cells of each class (columns) under each strategy (rows) of a finished sweep."""
    from .sweep import load_sweep  # sweep imports this module

    runs, manifest = load_sweep(sweep_dir)
    table = cells(runs, [axis["path"] for axis in manifest["axes"]])
    counts = pd.crosstab(table["strategy"], table["class"])
    return counts.reindex(index=manifest["strategies"], columns=list(CLASSES), fill_value=0)


def save_map(sweep_dir: str | Path, formats: list[str] | tuple[str, ...] = ("png",)
             ) -> list[Path]:
    """Draw the map of *sweep_dir* into ``map.<format>`` there (each file replaced whole)."""
    figure = plot_map(sweep_dir)
    written = []
    for fmt in formats:
        path = Path(sweep_dir) / f"map.{fmt}"
        aside = path.with_name(f".map-{os.getpid()}.{fmt}")
        try:
            figure.savefig(aside, dpi=110)
            os.replace(aside, path)
        finally:
            aside.unlink(missing_ok=True)
        written.append(path)
    return written

"""The metastability map: one panel per strategy, a cell per grid point, coloured by class,
labelled with its recovery time and the limit the rule held it to; the rule under the title."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from herdsim.analysis.metastability import (
    CLASSES,
    GOODPUT_FLOOR,
    SLOW_FACTOR,
    SLOW_FLOOR,
    cells,
    slow_limits,
)
from herdsim.errors import SweepError
from herdsim.policies.durations import format_duration

COLORS = {  # Okabe & Ito (2008): distinct for colour-blind readers, black text on all
    "recovered": "#56B4E9",  # sky blue
    "degraded": "#F0E442",  # yellow
    "metastable": "#D55E00",  # vermillion
}
HATCH = {"recovered": "", "degraded": "..", "metastable": "//"}
LEGEND_IN_A_ROW = 11.0  # inches of figure the three classes' legend needs on one line
NEVER, NOT_YET = "never", "not yet"  # a cell with no recovery: metastable, still draining
RULE = (  # one line (or more) per class, under the title
    f"recovered: healthy again within the limit, max({SLOW_FLOOR:g} s, {SLOW_FACTOR:g} × ideal "
    f"drain) after the outage, and serving at least {GOODPUT_FLOOR:.0%} of the offered jobs "
    "at the end (ideal drain = d·ρ/(1−ρ): the time a smooth queue at load ρ needs to work "
    "off d seconds of outage)",
    "degraded: every other run, recovered but slower than the limit or serving less, or "
    f"{NOT_YET} recovered when the run ends while still serving {GOODPUT_FLOOR:.0%} with "
    "no new crash",
    f"metastable: {NEVER} recovered, and crashed again after the outage or serving under "
    f"{GOODPUT_FLOOR:.0%}",
)


def plot_map(runs: pd.DataFrame, manifest: dict[str, Any], x: str | None = None,
             y: str | None = None) -> Figure:
    """The metastability map of a finished sweep (its table and manifest): one panel per
    strategy, a cell per grid point coloured by class and labelled with its recovery time.

    *x* and *y* name swept fields (default: the first two axes of the sweep). A sweep with
    more than two axes needs them chosen, and every other axis must have a single value.
    """
    where = manifest.get("source", "sweep")
    axes = {a["path"]: a for a in manifest["axes"]}
    if not axes:
        raise SweepError(f"{where}: the sweep has no --grid axis to map")
    chosen = [a for a in (x, y) if a is not None] or list(axes)[:2]
    if len(set(chosen)) < len(chosen):
        raise SweepError(f"{where}: x and y are the same field ({chosen[0]})")
    for path in chosen:
        if path not in axes:
            raise SweepError(f"{where}: {path} is not a swept field ({', '.join(axes)})")
    others = [p for p in axes if p not in chosen and len(axes[p]["values"]) > 1]
    if others:
        raise SweepError(f"{where}: the map shows two axes; also swept: "
                         f"{', '.join(others)}")
    table = cells(runs, chosen)
    limits = runs.assign(limit=slow_limits(runs)).groupby(
        ["strategy", *chosen], sort=False, dropna=False)["limit"].median()
    table["limit"] = [limits[tuple(row[k] for k in ("strategy", *chosen))]
                      for _, row in table.iterrows()]
    for path in chosen:
        axes[path]["load"] = _loads(runs, path)
    x_axis = axes[chosen[0]]
    y_axis = axes[chosen[1]] if len(chosen) > 1 else None
    strategies = list(manifest["strategies"])
    n_x = len(x_axis["values"])
    n_y = len(y_axis["values"]) if y_axis else 1
    width_in = max(6.0, 0.95 * n_x + 2.2) * len(strategies)
    columns = 3 if width_in >= LEGEND_IN_A_ROW else 1  # a narrow map: one class a line
    fig = Figure(figsize=(width_in, 1.0 + 0.75 * n_y + 2.4 + 0.5 * (columns == 1)),
                 layout="constrained")
    panels = fig.subplots(1, len(strategies), sharey=True, squeeze=False)[0]
    for ax, strategy in zip(panels, strategies, strict=True):
        _panel(ax, table[table["strategy"] == strategy], x_axis, y_axis)
        ax.set_title(strategy, fontsize=16, fontweight="bold")
    panels[0].set_ylabel(_axis_label(y_axis) if y_axis else "", fontsize=14)
    reps = manifest["replications"]
    width = int(fig.get_figwidth() * 72 / (0.56 * 12))  # characters of 12 pt on a line
    head = (f"{manifest['scenario']['name']}: does it recover after the outage?  "
            f"(label = recovery time, median of {reps} replication"
            f"{'s' if reps > 1 else ''} per cell, and the limit it had)")
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in (head, *RULE)),
                 fontsize=12)
    fig.legend(handles=_legend(), loc="outside lower center", ncol=columns, fontsize=12,
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
    """The recovery time, else ``never`` (metastable) or ``not yet`` (still draining);
    the limit (:func:`~herdsim.analysis.metastability.slow_limits`) under it; ``k/n`` when
    only k of n replications agree on the class."""
    recovery = row["recovery_time"]
    if np.isnan(recovery):
        text = NEVER if row["class"] == "metastable" else NOT_YET
    else:
        text = f"{recovery:.3g} s"
    if np.isfinite(row["limit"]):
        text += f"\nlimit {row['limit']:.3g} s"
    return text if row["agree"] == row["runs"] else f"{text}\n{row['agree']}/{row['runs']}"


def _legend() -> list[Patch]:
    text = {
        "recovered": "recovered (within the limit)",
        "degraded": f"degraded (slower than the limit, or {NOT_YET} recovered)",
        "metastable": f"metastable ({NEVER} recovered)",
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

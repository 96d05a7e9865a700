"""The safe-operating figure: where recovering stops along a setting, today's setting and
the margin between them (``herdsim boundary``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

EDGE, TODAY, RUNS = "#D55E00", "#0072B2", "#555555"  # Okabe & Ito


def margin_text(value: float, current: float, below: bool) -> str:
    """``your setting 700 is 45% past the edge`` / ``… has 20% to spare``."""
    inside = current <= value if below else current >= value
    share = abs(value - current) / value
    return (f"your setting {current:.4g} has {share:.0%} to spare" if inside else
            f"your setting {current:.4g} is {share:.0%} past the edge")


def safe_operating(path: str, value: float, low: float, high: float, current: float,
                   below: bool, runs: pd.DataFrame, title: str) -> Figure:
    """One setting: the runs' share recovering at each value tried, the crossing with its
    95% interval, today's setting and the margin."""
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    share = runs.groupby("x")["recovered"].agg(["mean", "count"])
    ax.scatter(share.index, share["mean"], s=12 + 6 * share["count"], color=RUNS,
               label="simulations: share recovering at each value tried (size: runs)")
    ax.axvspan(low, high, color=EDGE, alpha=0.25, label="95% interval of the edge")
    side = "up to" if below else "from"
    ax.axvline(value, color=EDGE, lw=2,
               label=f"the edge: recovers {side} {value:.4g} (95% CI {low:.4g}–{high:.4g})")
    ax.axvline(current, color=TODAY, lw=2, ls="--",
               label=margin_text(value, current, below))
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(path)
    ax.set_ylabel("P(recover) (not metastable)")
    ax.set_title(f"{title}\nwhat it can absorb along {path}: "
                 f"{margin_text(value, current, below)}", fontsize=11)
    ax.legend(fontsize=8, loc="best")
    return fig


def curve(path: str, along: str, points: Sequence[tuple[float, float, float, float]],
          today: tuple[float, float], title: str) -> Figure:
    """Two settings: the edge along *path* (with its interval) at each value of *along*
    (``points``: along, value, low, high) and today's pair of settings."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    xs = [p[0] for p in points]
    ax.errorbar(xs, [p[1] for p in points],
                yerr=[[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]],
                color=EDGE, marker="o", capsize=3, label="the edge (95% interval)")
    ax.plot(*today, marker="*", ms=14, color=TODAY, ls="none", label="today's settings")
    ax.set_xlabel(along)
    ax.set_ylabel(path)
    ax.set_title(f"{title}\nwhere recovering stops: the boundary curve", fontsize=11)
    ax.legend(fontsize=8)
    return fig


def over_map(fig: Figure, strategy: str, x_values: Sequence[float],
             y_values: Sequence[float],
             points: Sequence[tuple[float, float, float, float]]) -> Figure:
    """The boundary curve (``points``: along, value, low, high) drawn over a sweep map
    (:func:`~herdsim.plots.metastability_map.plot_map` with the second path on x and the
    first on y), on the panel of *strategy*: the map's cells sit at index positions, so
    each value is placed between them (on a log scale when the axis is geometric)."""
    ax = next((a for a in fig.axes if a.get_title() == strategy), fig.axes[0])
    place_x, place_y = _placer(x_values), _placer(y_values)
    xs = [place_x(p[0]) for p in points]
    ys = [place_y(p[1]) for p in points]
    ax.fill_between(xs, [place_y(p[2]) for p in points], [place_y(p[3]) for p in points],
                    color="black", alpha=0.15, zorder=5)
    ax.plot(xs, ys, color="black", lw=2.5, marker="o", zorder=6,
            label="herdsim boundary: P(recover) = 1/2 (band: 95% CI)")
    ax.legend(loc="upper left", fontsize=10)
    return fig


def _placer(values: Sequence[float]):
    """value -> the map's index coordinate (interpolated; log when the values are)."""
    grid = np.asarray(values, dtype=float)
    positive = bool((grid > 0).all())
    ratios = grid[1:] / grid[:-1] if positive and grid.size > 2 else np.array([])
    logged = ratios.size > 0 and np.allclose(ratios, ratios[0]) and ratios[0] != 1
    scale = np.log if logged else (lambda v: v)
    index = np.arange(grid.size, dtype=float)
    return lambda v: float(np.interp(scale(v), scale(grid), index, left=-0.5,
                                     right=grid.size - 0.5))

"""The safe-operating figure: where recovering stops along a setting, today's setting and
the margin between them (``herdsim boundary``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

EDGE, TODAY, RUNS, FLUID, SAFE = "#D55E00", "#0072B2", "#333333", "#009E73", "#56B4E9"
# (Okabe & Ito)


class Edge(Protocol):
    """What the figure reads of a boundary (:class:`herdsim.experiments.boundary.Boundary`):
    the crossing and its interval, today's setting, which side recovers, the fluid model's
    answer, the runs (``x``, ``recovered``), the unit of the values and the fitted
    P(recover | x)."""

    path: str
    value: float
    low: float
    high: float
    current: float
    below: bool
    fluid: float | None
    fluid_from: float | None
    runs: pd.DataFrame

    @property
    def unit(self) -> str: ...

    def probability(self, x: np.ndarray) -> np.ndarray: ...


def number(value: float, unit: str = "") -> str:
    """``484.3``, ``3.2 s``: a value of the searched setting, with its unit."""
    return f"{value:.4g}{f' {unit}' if unit else ''}"


def margin_text(value: float, current: float, below: bool, unit: str = "") -> str:
    """``your setting 700 is 45% past the edge`` / ``… has 20% to spare``."""
    inside = current <= value if below else current >= value
    share = abs(value - current) / value
    return (f"your setting {number(current, unit)} has {share:.0%} to spare" if inside else
            f"your setting {number(current, unit)} is {share:.0%} past the edge")


def edge_text(edge: Edge) -> str:
    """``recovers up to 484.3 (95% CI 465.4–503.3)``."""
    side = "up to" if edge.below else "from"
    return (f"recovers {side} {number(edge.value, edge.unit)} (95% CI {edge.low:.4g}–"
            f"{number(edge.high, edge.unit)})")


def safe_operating(edge: Edge, title: str) -> Figure:
    """One setting: the share of runs recovering at each value tried (k/n beside each),
    the logistic fit P(recover | x) the edge comes from, the edge with its 95% interval,
    the fluid model's answer, today's setting and the margin. Line styles tell them apart
    without colour: the fit solid black, the edge solid over a hatched band, the fluid's
    dotted, today's dashed."""
    fig = Figure(figsize=(9, 6.2), layout="constrained")
    ax = fig.add_subplot()
    runs = edge.runs
    seen = [*runs["x"], edge.current, edge.low, edge.high,
            *([edge.fluid] if edge.fluid is not None else [])]
    lo, hi = min(seen), max(seen)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    grid = np.linspace(lo - pad, hi + pad, 400)
    ax.plot(grid, edge.probability(grid), color="black", lw=1.6,
            label="logistic fit P(recover | x) over every run")
    share = runs.groupby("x")["recovered"].agg(["sum", "count"])
    ax.plot(share.index, share["sum"] / share["count"], "o", color=RUNS, ms=7,
            label="simulations: share recovering at a value tried (recovering/runs)")
    for x, (k, n) in share.iterrows():
        ax.annotate(f"{k:.0f}/{n:.0f}", (x, k / n), textcoords="offset points",
                    xytext=(0, 8 if k / n < 0.9 else -14), ha="center", fontsize=8,
                    color=RUNS, bbox={"fc": "white", "ec": "none", "pad": 0.3,
                                      "alpha": 0.85}, zorder=4)
    ax.axvspan(edge.low, edge.high, facecolor=EDGE, alpha=0.18, hatch="//",
               edgecolor=EDGE, lw=0, label="95% interval of the edge")
    ax.axvline(edge.value, color=EDGE, lw=2,
               label=f"the edge, P(recover) = 1/2: {edge_text(edge)}")
    if edge.fluid is not None:
        said = (number(edge.fluid, edge.unit) if edge.fluid_from is None else
                f"between {edge.fluid_from:.4g} and {number(edge.fluid, edge.unit)} (its "
                "grid's step)")
        ax.axvline(edge.fluid, color=FLUID, lw=2, ls=":",
                   label=f"the fluid model's answer: {said}; the search started here")
    ax.axvline(edge.current, color=TODAY, lw=2, ls="--",
               label=margin_text(edge.value, edge.current, edge.below, edge.unit))
    ax.axhline(0.5, color="0.6", lw=0.8, ls=(0, (1, 3)))
    ax.set_xlim(grid[0], grid[-1])
    ax.set_ylim(-0.08, 1.1)
    ax.set_xlabel(edge.path + (f" ({edge.unit})" if edge.unit else ""))
    ax.set_ylabel("P(recover): share of runs not metastable")
    ax.set_title(f"{title}: where recovering stops along {edge.path}\n{edge_text(edge)}; "
                 f"{margin_text(edge.value, edge.current, edge.below, edge.unit)}",
                 fontsize=11)
    fig.legend(loc="outside lower center", ncols=1, fontsize=8, frameon=False)
    return fig


class Traced(Protocol):
    """What the curve figure reads of a boundary curve
    (:class:`herdsim.experiments.boundary.Curve`): its points, its boundaries and the
    second path's unit."""

    path: str
    along: str

    @property
    def edges(self) -> Sequence[Edge]: ...

    @property
    def points(self) -> list[tuple[float, float, float, float]]: ...

    @property
    def unit(self) -> str: ...


def _today_edge(traced: Traced, along: float) -> float:
    """The edge at today's value of the second path, read off the curve (log-linear
    between its points when they are all positive)."""
    xs, ys = zip(*[(p[0], p[1]) for p in traced.points], strict=True)
    scale = np.log if min(xs) > 0 and along > 0 else (lambda v: v)
    return float(np.interp(scale(along), scale(np.asarray(xs)), ys))


def curve(traced: Traced, today: tuple[float, float], title: str) -> Figure:
    """Two settings: the edge along ``traced.path`` (with its 95% interval) at each value
    of ``traced.along``, the side that recovers shaded, and today's pair of settings with
    its margin. Readable without colour: the edge a line with markers, its interval
    hatched, the recovering side dotted, today a star."""
    fig = Figure(figsize=(9, 5.8), layout="constrained")
    ax = fig.add_subplot()
    xs, ys, lows, highs = (np.asarray(v, dtype=float) for v in zip(*traced.points,
                                                                    strict=True))
    below = sum(edge.below for edge in traced.edges) * 2 >= len(traced.edges)
    unit_x, unit_y = traced.unit, traced.edges[0].unit
    top = max(highs.max(), today[1]) * 1.15
    bottom = min(lows.min(), today[1]) * 0.85
    ax.fill_between(xs, lows, highs, facecolor=EDGE, alpha=0.2, hatch="//", edgecolor=EDGE,
                    lw=0, label="95% interval of the edge")
    ax.fill_between(xs, bottom if below else ys, ys if below else top, facecolor=SAFE,
                    alpha=0.25, hatch="..", edgecolor="0.55", lw=0,
                    label=f"recovers (P(recover) > 1/2): {traced.path} "
                          f"{'below' if below else 'above'} the edge")
    ax.plot(xs, ys, color=EDGE, marker="o", lw=2, label="the edge, P(recover) = 1/2")
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(number(y, unit_y), (x, y), textcoords="offset points", xytext=(0, 7),
                    ha="center", fontsize=8)
    edge = _today_edge(traced, today[0])
    ax.plot(*today, marker="*", ms=16, color=TODAY, ls="none",
            label=f"today: {traced.along} {number(today[0], unit_x)}; "
                  f"{margin_text(edge, today[1], below, unit_y)} ({number(edge, unit_y)})")
    if xs.min() > 0 and xs.max() / xs.min() >= 3:
        ax.set_xscale("log")
        ax.set_xticks(xs, [number(x, unit_x) for x in xs])
        ax.minorticks_off()
    ax.set_ylim(bottom, top)
    ax.set_xlabel(traced.along + (f" ({unit_x})" if unit_x else ""))
    ax.set_ylabel(traced.path + (f" ({unit_y})" if unit_y else ""))
    ax.set_title(f"{title}: where recovering stops — the boundary curve\nthe edge along "
                 f"{traced.path} at {len(xs)} values of {traced.along}", fontsize=11)
    fig.legend(loc="outside lower center", ncols=1, fontsize=8, frameon=False)
    return fig


def over_map(fig: Figure, strategy: str, x_values: Sequence[float],
             y_values: Sequence[float],
             points: Sequence[tuple[float, float, float, float]],
             today: tuple[float, float] | None = None) -> Figure:
    """The boundary curve (``points``: along, value, low, high) drawn over a sweep map
    (:func:`~herdsim.plots.metastability_map.plot_map` with the second path on x and the
    first on y), on the panel of *strategy*, with today's settings (*today*: along,
    value) as a star: the map's cells sit at index positions, so each value is placed
    between them (on a log scale when the axis is geometric). One legend under it all:
    the map's classes, then the curve's."""
    ax = next(a for a in fig.axes if a.get_title() == strategy)
    place_x, place_y = _placer(x_values), _placer(y_values)
    xs = [place_x(p[0]) for p in points]
    ys = [place_y(p[1]) for p in points]
    handles = [ax.fill_between(xs, [place_y(p[2]) for p in points],
                               [place_y(p[3]) for p in points], facecolor="black",
                               alpha=0.25, hatch="xx", edgecolor="black", lw=0, zorder=5,
                               label="its 95% interval"),
               *ax.plot(xs, ys, color="black", lw=2.5, marker="o", zorder=6,
                        label="herdsim boundary: P(recover) = 1/2, found by search")]
    if today is not None:
        handles += ax.plot(place_x(today[0]), place_y(today[1]), marker="*", ms=22,
                           color=TODAY, markeredgecolor="white", ls="none", zorder=7,
                           label="today's settings")
    classes = fig.legends[0] if fig.legends else None  # the map's: one legend under it all
    if classes is not None:
        handles = [*(h for h in classes.legend_handles if h is not None), *handles]
        classes.remove()
    fig.legend(handles=handles, loc="outside lower center", ncol=1, fontsize=11,
               frameon=False)
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

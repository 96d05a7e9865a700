"""Figures of a comparison (or of one run): ``timeline``, ``sleeps`` and ``kpis``.

Built on matplotlib's object API (no pyplot state, no GUI backend): each function returns
a :class:`~matplotlib.figure.Figure` that Jupyter displays and ``savefig`` writes as PNG,
SVG or PDF. Colours come from the Okabe-Ito and Tol palettes (safe for colour-blind readers) and
are fixed per strategy name; arms of one strategy differ by line style.
"""

from __future__ import annotations

import io
import zlib
from typing import Any, Protocol

import matplotlib as mpl
import matplotlib.figure
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter, MaxNLocator

from herdsim.analysis.kpis import FIGURE, format_kpi
from herdsim.analysis.promql import rate as promql_rate
from herdsim.analysis.theory import binned, expected_counts, simulated_counts, sleep_prev
from herdsim.config.durations import format_duration
from herdsim.config.scenario import Scenario

STRATEGY_COLORS = {  # Okabe & Ito (2008), and one of Tol's muted colours
    "fixed": "#CC79A7",  # reddish purple
    "exponential": "#D55E00",  # vermillion
    "full_jitter": "#0072B2",  # blue
    "equal_jitter": "#009E73",  # bluish green
    "decorrelated_jitter": "#56B4E9",  # sky blue
    "decorrelated_jitter_v2": "#E69F00",  # orange
    "proportional_jitter": "#882255",  # wine (Tol)
}
OTHER_COLORS = ("#332288", "#999933", "#44AA99", "#AA4499", "#000000")  # Tol's muted, black
LINE_STYLES = ("-", "--", ":", "-.")
CAPACITY_STYLE = {"color": "black", "linestyle": "--", "linewidth": 1.6}
OUTAGE_STYLE = {"color": "0.55", "alpha": 0.3, "linewidth": 0}
RETRY_RATE_WINDOW = "10s"
THEORY_CDF = "theory (strategy cdf)"
STYLE = {
    "font.size": 14,
    "axes.titlesize": 15,
    "axes.titlelocation": "left",
    "axes.labelsize": 14,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "figure.titlesize": 19,
    "figure.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
class Arm(Protocol):
    """What a figure needs of an arm (:class:`herdsim.results.comparison.Arm`)."""

    label: str
    strategy: str
    settings: dict[str, Any]
    scenario: Scenario


class Comparison(Protocol):
    """What a figure needs of a comparison (:class:`herdsim.results.comparison.Comparison`)."""

    scenario: Scenario
    arms: list[Any]
    replications: int
    timeseries: pd.DataFrame
    sleeps: pd.DataFrame
    peaks: pd.DataFrame | None

    @property
    def varied(self) -> str: ...

    def ranked(self) -> pd.DataFrame: ...

    def missing(self, key: str) -> str: ...


class Figure(matplotlib.figure.Figure):
    """A matplotlib Figure that Jupyter displays even when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png")
        return buffer.getvalue()


def strategy_color(strategy: str) -> str:
    """The fixed colour of a strategy: built-ins by name, others by a hash of the name."""
    name = strategy.rpartition(":")[2] if strategy not in STRATEGY_COLORS else strategy
    if name in STRATEGY_COLORS:
        return STRATEGY_COLORS[name]
    return OTHER_COLORS[zlib.crc32(strategy.encode()) % len(OTHER_COLORS)]


def arm_styles(arms: list[Arm]) -> dict[str, dict]:
    """``label -> {color, linestyle}``: the strategy's colour, a style per varied setting."""
    seen: dict[str, int] = {}
    styles = {}
    for arm in arms:
        k = seen[arm.strategy] = seen.get(arm.strategy, -1) + 1
        styles[arm.label] = {"color": strategy_color(arm.strategy),
                             "linestyle": LINE_STYLES[k % len(LINE_STYLES)]}
    return styles


def _title(c: Comparison, what: str, replication: int | None = None) -> str:
    shown = replication is not None and c.replications > 1
    reps = f" (replication {replication}; {c.replications} per arm)" if shown else ""
    n = len(c.arms)
    arms = f"{n} arms varying {c.varied}" if n > 1 else f"strategy {c.arms[0].label}"
    return f"Scenario “{c.scenario.name}”: {what}\n{arms}{reps}"


def _one(frame: pd.DataFrame, label: str, replication: int = 0) -> pd.DataFrame:
    return frame[(frame["arm"] == label) & (frame["replication"] == replication)]


def _shade_outages(ax, windows: list[tuple[float, float]]) -> None:
    for start, end in windows:
        ax.axvspan(start, end, **OUTAGE_STYLE)


def _intervals(time: np.ndarray, mask: np.ndarray, width: float) -> list[tuple[float, float]]:
    """``(start, length)`` of each run of consecutive True bins."""
    edges = np.diff(np.r_[0, mask.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(time[s], (e - s) * width) for s, e in zip(starts, ends, strict=True)]


def call_rate(c: Comparison, arm: Arm, replication: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """What the timeline plots for *arm*: times, calls/s, and what the rate means.

    The busiest ``peak_window`` within each bin when the short-window peaks were saved,
    else the bin average.
    """
    sc = arm.scenario
    if c.peaks is not None:
        peaks = _one(c.peaks, arm.label, replication)
        what = (f"busiest {format_duration(sc.peak_window)} in each "
                f"{format_duration(sc.bin)} bin")
        return peaks["time"].to_numpy(), peaks["peak_rate"].to_numpy(), what
    ts = _one(c.timeseries, arm.label, replication)
    what = f"average over each {format_duration(sc.bin)} bin"
    return ts["time"].to_numpy(), ts["attempts"].to_numpy() / sc.bin, what


def retry_rate(ts: pd.DataFrame, bin_width: float) -> pd.Series:
    """Retries per second as ``rate(worker_job_execution_total{status="retry"}[10s])``
    shows them, with the counter scraped at every bin end."""
    counter = pd.Series(np.r_[0.0, ts["retry"].cumsum().to_numpy()],
                        index=np.r_[0.0, ts["time"].to_numpy() + bin_width])
    return promql_rate(counter, RETRY_RATE_WINDOW)


def timeline(c: Comparison, replication: int = 0) -> Figure:
    """Calls/s per arm (one row each, shared scale), retries/s, backlog, downstream state."""
    arms, styles, base = c.arms, arm_styles(c.arms), c.scenario
    n = len(arms)
    breaker = "breaker_open" in c.timeseries and bool(c.timeseries["breaker_open"].gt(0).any())
    heights = [1.35] * n + [2.6, 2.6, 0.5 * n + 0.4]
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(16, sum(heights) + 1.6), layout="constrained")
        grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
        top = fig.add_subplot(grid[0])
        rows = [top] + [fig.add_subplot(grid[i], sharex=top, sharey=top) for i in range(1, n)]
        ax_retry, ax_queue, ax_state = (fig.add_subplot(grid[i], sharex=top)
                                        for i in range(n, n + 3))
        what, highest = "", 0.0
        for i, (ax, arm) in enumerate(zip(rows, arms, strict=True)):
            style = styles[arm.label]
            time, calls, what = call_rate(c, arm, replication)
            # the occ model's single row has no capacity in calls/s
            occ = arm.scenario.downstream.model == "occ"
            capacity = None if occ else arm.scenario.downstream.capacity_rate()
            _shade_outages(ax, arm.scenario.outage_windows)
            ax.fill_between(time, calls, step="post", color=style["color"], alpha=0.35, lw=0)
            ax.step(time, calls, where="post", color=style["color"], lw=1.3)
            box = {"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.5}
            ax.text(0.006, 0.9, arm.label, transform=ax.transAxes, ha="left", va="top",
                    color=style["color"], weight="bold", fontsize=15, bbox=box)
            peak = calls.max(initial=0.0)
            if capacity is None:
                peak_text, loud = f"peak {peak:,.0f} calls/s", False
            else:
                ax.axhline(capacity, **CAPACITY_STYLE)
                peak_text, loud = f"peak {peak / capacity:.1f}× capacity", peak >= 2 * capacity
            ax.text(0.994, 0.9, peak_text, transform=ax.transAxes, ha="right", va="top",
                    weight="bold" if loud else "normal", fontsize=15, bbox=box)
            ax.set_ylabel("calls/s")
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.tick_params(labelbottom=False)
            highest = max(highest, peak, capacity or 0.0)
            if i == 0:
                capacity_text = ("" if capacity is None else
                                 f"; dashed: capacity ({capacity:,.0f} calls/s)")
                ax.set_title(f"Downstream calls per second ({what}){capacity_text}; "
                             "grey: outage")
        top.set_ylim(0, highest * 1.1)  # shared by every arm's row
        for arm in arms:
            ts = _one(c.timeseries, arm.label, replication)
            line = {**styles[arm.label], "lw": 2.2, "label": arm.label}
            rate = retry_rate(ts, arm.scenario.bin)
            ax_retry.plot(rate.index, rate.to_numpy(), **line)
            ax_queue.plot(ts["time"], ts["queue_depth"], **line)
        for ax in (ax_retry, ax_queue, ax_state):
            _shade_outages(ax, base.outage_windows)
        ax_retry.set_title("Retries per second, as "
                           'rate(worker_job_execution_total{status="retry"}[10s]) shows them')
        ax_retry.set_ylabel("retries/s")
        ax_queue.set_title("Main-queue backlog (jobs waiting for a worker)")
        ax_queue.set_ylabel("jobs")
        for ax in (ax_retry, ax_queue):
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_ylim(0, max(1.0, ax.get_ylim()[1]))  # an all-zero series: no "50m jobs"
            ax.tick_params(labelbottom=False)
        ax_queue.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))  # whole jobs
        ax_retry.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
                        handlelength=2.6)
        _state_panel(ax_state, c, styles, replication, breaker)
        question = ("which arm hammers the downstream after the outage?" if n > 1
                    else "what the retries do to the downstream")
        fig.suptitle(_title(c, question, replication))
    return fig


def _state_panel(ax, c: Comparison, styles: dict, replication: int, breaker: bool) -> None:
    for i, arm in enumerate(c.arms):
        ts = _one(c.timeseries, arm.label, replication)
        time, width = ts["time"].to_numpy(), arm.scenario.bin
        color = styles[arm.label]["color"]
        down = _intervals(time, ts["downstream_up"].to_numpy() <= 0, width)
        ax.broken_barh(down, (i - 0.4, 0.8), facecolors=color)
        if breaker:
            opened = _intervals(time, ts["breaker_open"].to_numpy() > 0, width)
            ax.broken_barh(opened, (i - 0.4, 0.8), facecolors="none", edgecolors=color,
                           hatch="//", lw=0.8)
    ax.set_yticks(range(len(c.arms)), [arm.label for arm in c.arms])
    ax.set_ylim(len(c.arms) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("time (s)")
    ax.set_title("Downstream down (filled bars)"
                 + ("; circuit breaker open (hatched)" if breaker else ""))


def _sleep_edges(sleeps: pd.Series, bins: int = 50) -> np.ndarray:
    """Bins of a round width, from 0 past the 99.5th percentile of *sleeps*."""
    top = 1.05 * max(float(sleeps.quantile(0.995)) if len(sleeps) else 1.0, 1e-3)
    decade = 10 ** np.floor(np.log10(top / bins))
    width = next(decade * m for m in (1, 2, 2.5, 5, 10) if decade * m * bins >= top)
    return np.arange(0.0, np.ceil(top / width) * width + width / 2, width)


def sleeps(c: Comparison) -> Figure:
    """Histogram of retry sleeps per arm with the strategy's theoretical distribution."""
    arms, styles = c.arms, arm_styles(c.arms)
    cols = min(len(arms), 4)
    nrows = -(-len(arms) // cols)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(4.6 * cols + 1, 3.6 * nrows + 1.4), layout="constrained")
        axes = fig.subplots(nrows, cols, squeeze=False).ravel()
        for ax in axes[len(arms):]:
            ax.set_visible(False)
        for ax, arm in zip(axes, arms, strict=False):
            data = c.sleeps[c.sleeps["arm"] == arm.label]
            edges = _sleep_edges(data["sleep"])
            ordered = sleep_prev(data, arm.scenario.retry.base)
            observed = binned(ordered["sleep"].to_numpy(), edges)
            ax.stairs(observed, edges, fill=True, color=styles[arm.label]["color"],
                      alpha=0.55, label="simulated")
            theory, how = _theory(arm, ordered, edges)
            if theory is not None:
                ax.stairs(theory, edges, color="black", lw=2, label=how)
            else:
                ax.text(0.5, 0.5, how, transform=ax.transAxes, ha="center", fontsize=13)
            hidden = int((ordered["sleep"] > edges[-1]).sum())
            note = f"{len(ordered):,} sleeps" + (f", {hidden:,} > {edges[-1]:g} s not shown"
                                                 if hidden else "")
            if theory is not None and how != THEORY_CDF:
                note += f"\n{how}"
            ax.set_title(f"{arm.label}\n{note}", color=styles[arm.label]["color"],
                         fontsize=14)
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_xlabel("sleep before retry (s)")
            ax.set_ylabel(f"sleeps per {edges[1] - edges[0]:g} s bin")
        handles = [Line2D([], [], color="0.5", lw=8, alpha=0.55, label="simulated sleeps"),
                   Line2D([], [], color="black", lw=2, label="theory (expected count)")]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
        pooled = " (all replications)" if c.replications > 1 else ""
        fig.suptitle(_title(c, f"how retry sleeps are spread{pooled}"))
    return fig


def _theory(arm: Arm, ordered: pd.DataFrame, edges: np.ndarray) -> tuple[np.ndarray | None, str]:
    try:
        strategy = arm.scenario.retry.build()
    except ValueError:
        return None, "strategy not importable here:\nno theory shown"
    if len(ordered) == 0:
        return None, "no retries"
    if callable(getattr(strategy, "cdf", None)):
        return expected_counts(strategy, ordered, edges), THEORY_CDF
    return simulated_counts(strategy, ordered, edges), "theory by Monte Carlo (no cdf)"


def kpis(c: Comparison) -> Figure:
    """The key numbers per arm, best arm on top, with 95% CIs when replicated."""
    ranked = c.ranked()
    styles = arm_styles(c.arms)
    n = len(ranked)
    window = format_duration(c.scenario.peak_window)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(18, 0.6 * n + 2.6), layout="constrained")
        axes = fig.subplots(1, len(FIGURE), sharey=True)
        y = np.arange(n)
        for ax, (key, (title, unit)) in zip(axes, FIGURE.items(), strict=True):
            values = ranked[key].to_numpy(dtype=float)
            ci = ranked.get(f"{key}_ci95")
            err = None if ci is None or ci.isna().all() else ci.to_numpy(dtype=float)
            colors = [styles[label]["color"] for label in ranked["arm"]]
            ax.barh(y, np.nan_to_num(values), xerr=err, color=colors, alpha=0.8,
                    error_kw={"ecolor": "0.2", "capsize": 4})
            finite = values[np.isfinite(values)]
            span = finite.max() if finite.size and finite.max() > 0 else 1.0
            for yi, value in zip(y, values, strict=True):
                ax.text((value if np.isfinite(value) else 0) + span * 0.02, yi,
                        format_kpi(value, missing=c.missing(key)),
                        va="center", fontsize=13,
                        weight="bold" if not np.isfinite(value) else "normal")
            if key == "peak_to_capacity":
                ax.axvline(1.0, **CAPACITY_STYLE)
            ax.set_xlim(0, span * 1.35)
            ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(4))
            if span >= 1e4:
                ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_title(title)
            ax.set_xlabel(unit.format(window=window))
            ax.grid(axis="y", visible=False)
        axes[0].set_yticks(y, ranked["arm"])
        axes[0].set_ylim(n - 0.5, -0.5)
        reps = (f"; bars: mean of {c.replications} replications ± 95% CI"
                if c.replications > 1 else "")
        fig.suptitle(_title(c, f"key numbers per arm, best first{reps}"))
    return fig


PLOTS = {"timeline": timeline, "sleeps": sleeps, "kpis": kpis}
FIGURES = tuple(PLOTS)


def draw(c: Comparison, kind: str) -> Figure:
    """The figure *kind* (``timeline``, ``sleeps`` or ``kpis``) of comparison *c*."""
    if kind not in PLOTS:
        raise ValueError(f"unknown plot {kind!r}; choose one of {', '.join(PLOTS)}")
    return PLOTS[kind](c)

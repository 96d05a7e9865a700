"""``landing``: when retries land, at 10 ms resolution, aligned at the outage's end.

The seed's picture: a retry lands when its sleep ends (``time + sleep`` of every retry
sleep drawn). Synchronised backoff lands a cohort in the same 10 ms (a Dirac delta);
jitter spreads it into a flat density. One row per arm on a shared logarithmic scale, so a
spike 20x (or 1,000x) another arm's stays readable next to a flat density.
"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.ticker import LogLocator

from herdsim.config.durations import format_duration
from herdsim.plots import coarse, describe
from herdsim.plots.style import (
    CAPACITY_STYLE,
    STYLE,
    Comparison,
    Figure,
    arm_styles,
    one,
    shade_outages,
    wide_size,
)

RESOLUTION = 0.01  # s: the seed's impulse is a few milliseconds wide
ZOOM = 1.0  # s shown around each arm's busiest 10 ms


def origin(c: Comparison) -> tuple[float, str]:
    """Where the time axis starts, and its label: the end of the last outage, else 0."""
    windows = c.scenario.outage_windows
    if not windows:
        return 0.0, "time (s)"
    end = max(e for _, e in windows)
    which = "the last outage" if len(windows) > 1 else "the outage"
    return end, f"time since {which} ended at {format_duration(end)} (s)"


def landings(sleeps: pd.DataFrame) -> np.ndarray:
    """When each retry lands (its sleep ends), sorted."""
    return np.sort((sleeps["time"] + sleeps["sleep"]).to_numpy(dtype=float))


def landing_counts(times: np.ndarray, lo: float, hi: float,
                   resolution: float = RESOLUTION) -> tuple[np.ndarray, np.ndarray]:
    """``edges, counts``: landings per *resolution* bin ``[edge, edge + resolution)``."""
    n = max(1, int(np.ceil((hi - lo) / resolution - 1e-9)))
    edges = lo + resolution * np.arange(n + 1)
    index = np.floor((times - lo) / resolution + 1e-9).astype(np.int64)
    index = index[(index >= 0) & (index < n)]
    return edges, np.bincount(index, minlength=n)


def busiest_of(counts: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """*counts* per 10 ms with at most :data:`~herdsim.plots.coarse.MAX_BINS` steps: over
    a long run each drawn step is the busiest 10 ms of the ones it covers (a spike keeps
    its height; the zoom keeps every 10 ms)."""
    k = coarse.factor(len(counts))
    if k == 1:
        return counts, edges
    starts = np.arange(0, len(counts), k)
    return np.maximum.reduceat(counts, starts), np.append(edges[starts], edges[-1])


def window(c: Comparison, shift: float, replication: int = 0) -> tuple[float, float]:
    """The x range with activity: from before the outage to where 99.5% have landed."""
    sc = c.scenario
    lo = -shift
    if sc.outage_windows:
        start = min(s for s, _ in sc.outage_windows)
        lo = max(-shift, start - shift - 0.5)
    tops = []
    for arm in c.arms:
        times = landings(one(c.sleeps, arm.label, replication)) - shift
        times = times[times >= lo]
        if times.size:
            tops.append(float(np.quantile(times, 0.995)))
    hi = max(tops, default=lo + 1.0)
    hi = min(sc.duration - shift, hi + 0.05 * (hi - lo) + 2 * RESOLUTION)
    return lo, max(hi, lo + 10 * RESOLUTION)


def landing(c: Comparison, replication: int = 0) -> Figure:
    """Retries landing per 10 ms, one row per arm, aligned at the end of the last outage."""
    arms, styles, sc = c.arms, arm_styles(c.arms), c.scenario
    shift, xlabel = origin(c)
    lo, hi = window(c, shift, replication)
    n = len(arms)
    counts = {}
    for arm in arms:
        times = landings(one(c.sleeps, arm.label, replication)) - shift
        counts[arm.label] = landing_counts(times, lo, hi)
    top = max((int(k.max(initial=0)) for _, k in counts.values()), default=0)
    busiest = top / RESOLUTION  # a capacity far above this binds nothing: not drawn
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=wide_size(n, 1.3), layout="constrained")
        grid = fig.add_gridspec(n, 2, width_ratios=[3.2, 1])
        axes = [fig.add_subplot(grid[0, 0])]
        axes += [fig.add_subplot(grid[i, 0], sharex=axes[0], sharey=axes[0])
                 for i in range(1, n)]
        zooms = [fig.add_subplot(grid[i, 1], sharey=axes[0]) for i in range(n)]
        for ax, zoom, arm in zip(axes, zooms, arms, strict=True):
            edges, k = counts[arm.label]
            color = styles[arm.label]["color"]
            cap = describe.capacity(arm.scenario, busiest)
            peak = int(k.max(initial=0))
            at = edges[int(np.argmax(k))] if peak else 0.0
            left = min(max(at - ZOOM / 2, lo), max(lo, hi - ZOOM))
            i0 = max(0, int((left - lo) / RESOLUTION) - 1)
            i1 = i0 + int(ZOOM / RESOLUTION) + 3
            shown = np.where(k > 0, k, 0.1)  # zero bins fall below the axis
            overview, over_edges = busiest_of(shown, edges)
            for target, part, at_edges in ((ax, overview, over_edges),
                                           (zoom, shown[i0:i1], edges[i0:i1 + 1])):
                shade_outages(target, arm.scenario.outage_windows, shift)
                target.stairs(part, at_edges, baseline=0.1, fill=True, color=color, alpha=0.45)
                target.stairs(part, at_edges, baseline=None, color=color, lw=1.0)
                target.set_yscale("log")
                if cap is not None:
                    target.axhline(cap * RESOLUTION, **CAPACITY_STYLE)
            zoom.set_xlim(left, left + ZOOM)
            zoom.tick_params(labelleft=False)
            zoom.set_title(f"zoom: {ZOOM:g} s at its peak", loc="right", fontsize=12)
            when = f"{at:+.2f}" if sc.outage_windows else f"{at:.2f}"
            note = f"peak {peak:,} in 10 ms at {when} s" if peak else "no retries land"
            if cap is not None and peak:
                note += f" ({peak / (cap * RESOLUTION):.1f}× what it serves in 10 ms)"
            ax.set_title(arm.label, color=color, weight="bold", loc="left", fontsize=15)
            ax.set_title(note, loc="right", fontsize=13)
            ax.set_ylabel("per 10 ms" if coarse.factor(len(k)) == 1 else
                          "busiest 10 ms\nper step")
            ax.yaxis.set_major_locator(LogLocator(numticks=4))
            if ax is not axes[-1]:
                ax.tick_params(labelbottom=False)
        cap = describe.capacity(sc, busiest)
        axes[0].set_ylim(0.5, max(10.0, top, 0.0 if cap is None else cap * RESOLUTION) * 2.5)
        axes[-1].set_xlim(lo, hi)
        axes[-1].set_xlabel(xlabel)
        zooms[-1].set_xlabel("same axis (s)")
        mode = ("; a requeued retry is due then, the poller moves it back within "
                f"{format_duration(sc.workers.poll_interval)}"
                if sc.workers.retry_mode == "requeue" else "")
        legend = ("; dashed: calls the healthy downstream serves in 10 ms"
                  if cap is not None else "")
        grey = "; grey: outage" if sc.outage_windows else ""
        fig.suptitle(describe.heading(
            c, "when the retries land", replication,
            f"Retries landing per 10 ms (log scale; a retry lands when its sleep ends{mode})"
            f"{legend}{grey}"), fontsize=14, fontweight="normal")
    return fig


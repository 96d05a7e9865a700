"""``landing``: when retries land, at 10 ms resolution, aligned at the outage's end.

The brief's picture: a retry lands when its sleep ends (``time + sleep`` of every retry
sleep drawn). Synchronised backoff lands a cohort in the same 10 ms (a Dirac delta);
jitter spreads it into a flat density. One row per arm on a shared logarithmic scale, so a
spike 20x (or 1,000x) another arm's stays readable next to a flat density.
"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.ticker import LogLocator

from herdsim.analysis.kpis import number_text
from herdsim.plots import coarse, describe
from herdsim.plots.style import (
    CAPACITY_STYLE,
    STYLE,
    TITLES_IN_PLACE,
    WIDE,
    Comparison,
    Figure,
    arm_styles,
    fitted,
    outage_key,
    shade_outages,
    text_width,
    wide_size,
)
from herdsim.policies.durations import format_duration

RESOLUTION = 0.01  # s: the brief's impulse is a few milliseconds wide
ZOOM = 1.0  # s shown around each arm's headline 10 ms; also the first landing's reach
ROW_WIDTH = WIDE[0] * 72 * 0.9 * 3.2 / 4.2  # points a row's titles may fill (zoom aside)


def headline(edges: np.ndarray, counts: np.ndarray, after: bool) -> tuple[int, float, str]:
    """``(count, at, what)``: the 10 ms a reader should see first. With an outage (*after*:
    the axis starts at its end) the first landing after it: the busiest 10 ms within
    :data:`ZOOM` s of the first retry landing after the outage ends (the first cohort on
    the recovering downstream, not a relapse later nor a peak inside the outage); else the
    busiest 10 ms of the run."""
    starts = edges[:-1]
    pick = np.ones(len(counts), dtype=bool)
    if after:
        landed = np.flatnonzero((starts >= 0) & (counts > 0))
        if not landed.size:
            return 0, 0.0, "no retry lands after the outage"
        first = starts[landed[0]]
        pick = (starts >= first) & (starts < first + ZOOM)
    if not (pick & (counts > 0)).any():
        return 0, 0.0, "no retries land"
    index = np.flatnonzero(pick)[int(np.argmax(counts[pick]))]
    what = "first landing after the outage" if after else "peak"
    return int(counts[index]), float(starts[index]), what


def origin(c: Comparison) -> tuple[float, str]:
    """Where the time axis starts, and its label: the end of the last outage, else 0."""
    end = c.scenario.last_outage_end
    if end is None:
        return 0.0, "time (s)"
    which = "the last outage" if len(c.scenario.all_outages) > 1 else "the outage"
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


def landing_times(c: Comparison, replication: int = 0) -> dict[str, np.ndarray]:
    """``arm label -> landings`` (sorted), the sleeps table split by arm in one pass."""
    mine = c.sleeps[c.sleeps["replication"] == replication]
    groups = {str(label): frame for label, frame in mine.groupby("arm", sort=False,
                                                                 observed=True)}
    empty = mine.iloc[:0]
    return {arm.label: landings(groups.get(arm.label, empty)) for arm in c.arms}


def busiest_of(counts: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """*counts* per 10 ms with at most :data:`~herdsim.plots.coarse.MAX_BINS` steps: over
    a long run each drawn step is the busiest 10 ms of the ones it covers (a spike keeps
    its height; the zoom keeps every 10 ms)."""
    k = coarse.factor(len(counts))
    if k == 1:
        return counts, edges
    starts = np.arange(0, len(counts), k)
    return np.maximum.reduceat(counts, starts), np.append(edges[starts], edges[-1])


def window(c: Comparison, shift: float, replication: int = 0,
           times_of: dict[str, np.ndarray] | None = None) -> tuple[float, float]:
    """The x range with activity: from before the outage to where 99.5% have landed."""
    sc = c.scenario
    lo = -shift
    if sc.first_outage_start is not None:
        lo = max(-shift, sc.first_outage_start - shift - 0.5)
    tops = []
    times_of = times_of if times_of is not None else landing_times(c, replication)
    for arm in c.arms:
        times = times_of[arm.label] - shift
        times = times[times >= lo]
        if times.size:
            tops.append(float(np.quantile(times, 0.995)))
    hi = max(tops, default=lo + 1.0)
    hi = min(sc.duration - shift, hi + 0.05 * (hi - lo) + 2 * RESOLUTION)
    return lo, max(hi, lo + 10 * RESOLUTION)


def landing(c: Comparison, replication: int = 0) -> Figure:
    """Retries landing per 10 ms, one row per arm, aligned at the end of the last outage."""
    arms, styles, sc = c.arms, arm_styles(c.arms), c.scenario
    names = describe.short_labels(arms)
    shift, xlabel = origin(c)
    times_of = landing_times(c, replication)
    lo, hi = window(c, shift, replication, times_of)
    n = len(arms)
    counts = {arm.label: landing_counts(times_of[arm.label] - shift, lo, hi) for arm in arms}
    top = max((int(k.max(initial=0)) for _, k in counts.values()), default=0)
    with mpl.rc_context({**STYLE, **TITLES_IN_PLACE}):
        fig = Figure(figsize=wide_size(n, 1.3), layout="constrained")
        grid = fig.add_gridspec(n, 2, width_ratios=[3.2, 1])
        axes = [fig.add_subplot(grid[0, 0])]
        axes += [fig.add_subplot(grid[i, 0], sharex=axes[0], sharey=axes[0])
                 for i in range(1, n)]
        zooms = [fig.add_subplot(grid[i, 1], sharey=axes[0]) for i in range(n)]
        for ax, zoom, arm in zip(axes, zooms, arms, strict=True):
            edges, k = counts[arm.label]
            color = styles[arm.label]["color"]
            cap = describe.capacity(arm.scenario)
            peak, at, what = headline(edges, k, bool(sc.outage_windows))
            left = min(max(at - ZOOM / 2, lo), max(lo, hi - ZOOM))
            i0 = max(0, int((left - lo) / RESOLUTION) - 1)
            i1 = i0 + int(ZOOM / RESOLUTION) + 3
            shown = np.where(k > 0, k, 0.1)  # zero bins fall below the axis
            overview, over_edges = busiest_of(shown, edges)
            for target, part, at_edges in ((ax, overview, over_edges),
                                           (zoom, shown[i0:i1], edges[i0:i1 + 1])):
                shade_outages(target, arm.scenario, shift)
                coarse.stairs(target, part, at_edges, baseline=0.1, fill=True, color=color,
                              alpha=0.45)
                coarse.stairs(target, part, at_edges, baseline=None, color=color, lw=1.0)
                target.set_yscale("log")
                if cap is not None:
                    target.axhline(cap * RESOLUTION, **CAPACITY_STYLE)
            zoom.set_xlim(left, left + ZOOM)
            zoom.tick_params(labelleft=False)
            zoom.set_title(f"zoom: {ZOOM:g} s around it", loc="right", fontsize=12)
            when = f"{at:+.2f}" if sc.outage_windows else f"{at:.2f}"
            note = f"{what}: {peak:,} per 10 ms at {when} s" if peak else what
            if cap is not None and peak:
                note += (f" = {number_text(peak / (cap * RESOLUTION))}× capacity "
                         f"({number_text(cap * RESOLUTION)} per 10 ms)")
            room = ROW_WIDTH - text_width(note, 13) - 20  # the name never runs into the note
            ax.set_title(fitted(names[arm.label], room, 15, bold=True), color=color,
                         weight="bold", loc="left", fontsize=15)
            ax.set_title(note, loc="right", fontsize=13)
            ax.set_ylabel("per 10 ms" if coarse.factor(len(k)) == 1 else
                          "busiest 10 ms\nper step")
            ax.yaxis.set_major_locator(LogLocator(numticks=4))
            if ax is not axes[-1]:
                ax.tick_params(labelbottom=False)
        cap = describe.capacity(sc)
        axes[0].set_ylim(0.5, max(10.0, top, 0.0 if cap is None else cap * RESOLUTION) * 2.5)
        axes[-1].set_xlim(lo, hi)
        axes[-1].set_xlabel(xlabel)
        zooms[-1].set_xlabel("same axis (s)")
        mode = ("; a requeued retry is due then, the poller moves it back within "
                f"{format_duration(sc.workers.poll_interval)}"
                if sc.workers.retry_mode == "requeue" else "")
        legend = ("; dashed: calls the healthy downstream serves in 10 ms"
                  if cap is not None else "")
        grey = outage_key(sc)
        fig.suptitle(describe.heading(
            c, "when the retries land", replication,
            f"Retries landing per 10 ms (log scale; a retry lands when its sleep ends{mode})"
            f"{legend}{grey}"), fontsize=14, fontweight="normal")
    return fig


"""``timeline``: downstream calls per arm (a row each), successes, and the panels with
something to show below them (retries, tiers, backlog, admission, down and open)."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

from herdsim.analysis.kpis import number_text, percent
from herdsim.config import graph
from herdsim.config.durations import format_duration
from herdsim.model.downstream import family
from herdsim.plots import describe
from herdsim.plots.style import (
    CAPACITY_STYLE,
    SLIDE_ARMS,
    STYLE,
    Arm,
    Comparison,
    Figure,
    arm_styles,
    one,
    shade_outages,
    wide_size,
)


def _intervals(time: np.ndarray, mask: np.ndarray, width: float) -> list[tuple[float, float]]:
    """``(start, length)`` of each run of consecutive True bins."""
    edges = np.diff(np.r_[0, mask.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(time[s], (e - s) * width) for s, e in zip(starts, ends, strict=True)]


def call_counts(c: Comparison, arm: Arm, replication: int = 0
                ) -> tuple[np.ndarray, np.ndarray, float, str]:
    """What the timeline plots for *arm*: times, downstream calls per window, the window
    (s), and what the numbers are.

    Calls in the busiest ``peak_window`` within each bin when the short-window peaks were
    saved, else calls per bin: every peak is stated in the window it was measured in,
    never scaled up to a second it was not measured over.
    """
    sc = arm.scenario
    if c.peaks is not None:
        peaks = one(c.peaks, arm.label, replication)
        what = (f"calls in the busiest {format_duration(sc.peak_window)} of each "
                f"{format_duration(sc.bin)} bin")
        calls = np.round(peaks["peak_rate"].to_numpy() * sc.peak_window, 6)  # whole calls
        return peaks["time"].to_numpy(), calls, sc.peak_window, what
    ts = one(c.timeseries, arm.label, replication)
    what = f"calls per {format_duration(sc.bin)} bin"
    return ts["time"].to_numpy(), ts["attempts"].to_numpy(dtype=float), sc.bin, what


def active_until(c: Comparison, replication: int = 0) -> float:
    """Where the x axis ends: shortly after the last bin with any call, success or backlog
    in any arm (a 600 s run with 10 s of activity shows 10 s), never before an outage ends."""
    ts = c.timeseries[c.timeseries["replication"] == replication]
    busy = ts[["attempts", "success"]].sum(axis=1) > 0
    if "queue_depth" in ts:
        busy |= ts["queue_depth"] > 0
    last = float(ts.loc[busy, "time"].max()) + c.scenario.bin if busy.any() else 0.0
    last = max(last, c.scenario.last_outage_end or 0.0)
    return min(c.scenario.duration, last + max(0.04 * last, 2 * c.scenario.bin))


def _panels(c: Comparison, replication: int) -> dict[str, bool]:
    """Which of the optional panels have something to show."""
    ts = c.timeseries[c.timeseries["replication"] == replication]
    closed = c.scenario.workers.count is not None
    breaker = "breaker_open" in ts and bool(ts["breaker_open"].gt(0).any())
    return {
        "retries": bool(ts["retry"].gt(0).any()),
        "backlog": closed and "queue_depth" in ts and bool(ts["queue_depth"].gt(0).any()),
        "state": bool(ts["downstream_up"].le(0).any()) or breaker,
        "breaker": breaker,
        "admission": "admission_limit" in ts and bool(ts["admission_limit"].notna().any()),
    }


def _succeeded(c: Comparison, label: str, replication: int) -> str:
    runs = c.runs[(c.runs["arm"] == label) & (c.runs["replication"] == replication)]
    if runs.empty or not runs["jobs_submitted"].iloc[0]:
        return ""
    row = runs.iloc[0]
    share = row.get("succeeded_fraction", row["jobs_succeeded"] / row["jobs_submitted"])
    return f" ({percent(float(share))} succeeded)"


def timeline(c: Comparison, replication: int = 0) -> Figure:
    """Calls/s per arm (one row each), successes/s, and only the panels with something to
    show: retries/s, backlog (closed loop), the admission limit against the calls admitted,
    downstream down and breaker open."""
    arms, styles, base = c.arms, arm_styles(c.arms), c.scenario
    n = len(arms)
    show = _panels(c, replication)
    extra = ["success"] + [k for k in ("retries", "backlog", "admission", "state") if show[k]]
    extra[1:1] = [f"tier:{name}" for name in tier_names(c)]  # a call graph: a row per tier
    heights = [1.0] * n + [{"state": 0.3 * n + 0.5}.get(k, 1.9) for k in extra]
    right = active_until(c, replication)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=wide_size(n, 1.5), layout="constrained")
        grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
        top = fig.add_subplot(grid[0])
        rows = [top] + [fig.add_subplot(grid[i], sharex=top) for i in range(1, n)]
        panels = {k: fig.add_subplot(grid[n + i], sharex=top) for i, k in enumerate(extra)}
        what = ""
        for ax, arm in zip(rows, arms, strict=True):
            _calls_row(ax, c, arm, styles[arm.label], replication)
            what = call_counts(c, arm, replication)[3]
        capacity = describe.capacity(base)
        cap_text = ("" if capacity is None else
                    "; dashed: what capacity serves in that window")
        grey = "; grey: outage" if base.outage_windows else ""
        explain = f"Rows: downstream {what}, each on its own scale{cap_text}{grey}"
        for ax in [*rows, *panels.values()]:
            shade_outages(ax, base.outage_windows)
            ax.tick_params(labelbottom=False)
        _draw_arms(panels, c, styles, replication)
        ax = panels["success"]
        offered = ""
        if family.of(base).queueing:
            ax.axhline(base.workload.rate, color="0.3", linestyle=":", lw=1.6)
            offered = f"; dotted: offered {base.workload.rate:,.4g} jobs/s"
        ax.set_title(f"Jobs succeeding per second (per {format_duration(base.bin)} bin)"
                     f"{offered}", fontsize=13)
        ax.set_ylabel("jobs/s")
        # the arms' legend in a band of its own under the panels (no blank band beside one)
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", frameon=False,
                   handlelength=2.4, fontsize=12, ncols=min(n, 4))
        _label_panels(panels, base)
        if "state" in panels:
            _state_panel(panels["state"], c, styles, replication, show["breaker"])
        bottom = list(panels.values())[-1]
        bottom.tick_params(labelbottom=True)
        bottom.set_xlabel("time (s)")
        top.set_xlim(0, right)
        if base.outage_windows:
            question = ("which arm hammers the downstream after the outage?" if n > 1
                        else "what the retries do after the outage")
        else:
            question = "which arm loads the downstream most?" if n > 1 else "calls and successes"
        fig.suptitle(describe.heading(c, question, replication, explain), fontsize=14,
                     fontweight="normal")
    return fig


def _draw_arms(panels: dict, c: Comparison, styles: dict, replication: int) -> None:
    """Each arm's line in every panel below the rows: successes, retries, a tier's calls,
    the backlog, the admission limit against the calls admitted."""
    for arm in c.arms:
        ts = one(c.timeseries, arm.label, replication)
        line = {**styles[arm.label], "lw": 2.0}
        width = arm.scenario.bin
        panels["success"].plot(ts["time"] + width / 2, ts["success"] / width,
                               label=arm.label + _succeeded(c, arm.label, replication),
                               **line)
        if "retries" in panels:
            panels["retries"].plot(ts["time"] + width / 2, ts["retry"] / width, **line)
        for key in panels:
            if key.startswith("tier:"):
                _tier_row(panels[key], key[5:], ts, width, line)
        if "backlog" in panels:
            panels["backlog"].plot(ts["time"], ts["queue_depth"], **line)
        if "admission" in panels and ts["admission_limit"].notna().any():
            admitted = ts["in_flight"] + ts["waiting"]
            panels["admission"].plot(ts["time"], admitted, **{**line, "lw": 1.0,
                                                               "alpha": 0.6})
            panels["admission"].step(ts["time"], ts["admission_limit"], where="post",
                                     **line)


def _rate_text(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _label_panels(panels: dict, base) -> None:
    """Titles, units and y axes (from 0, engineering notation) of the panels below."""
    if "retries" in panels:
        panels["retries"].set_title("Retry sleeps started per second "
                                    f"(per {format_duration(base.bin)} bin)", fontsize=13)
        panels["retries"].set_ylabel("retries/s")
    if "backlog" in panels:
        panels["backlog"].set_title("Main-queue backlog (jobs waiting for a worker)",
                                    fontsize=13)
        panels["backlog"].set_ylabel("jobs")
        panels["backlog"].yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    if "admission" in panels:
        panels["admission"].set_title("Admission limit (thick) and calls in service or "
                                      "waiting (thin)", fontsize=13)
        panels["admission"].set_ylabel("calls")
    tier_keys = [k for k in panels if k.startswith("tier:")]
    configs = graph.tiers(base.downstream, base.services) if tier_keys else {}
    for key in tier_keys:
        name, ax = key[5:], panels[key]
        capacity = configs[name].capacity_rate()
        note = f"concurrency / mean service = {_rate_text(capacity)} calls/s"
        if capacity <= 3 * ax.get_ylim()[1]:
            ax.axhline(capacity, **CAPACITY_STYLE)
            note = "dashed: " + note
        else:
            note += ", off the scale"
        ax.set_title(f"{name}: calls reaching it per second (thin: failed; {note})",
                     fontsize=13)
    for key in ("success", "retries", "backlog", "admission", *tier_keys):
        if key in panels:
            panels[key].yaxis.set_major_formatter(EngFormatter(sep=""))
            panels[key].set_ylim(0, max(1.0, panels[key].get_ylim()[1]))


def tier_names(c: Comparison) -> list[str]:
    """A call graph's tiers, top first, whose columns the time series has ([] else)."""
    sc = c.scenario
    if not graph.has_graph(sc.downstream, sc.services, sc.hedging):
        return []
    return [name for name in graph.tiers(sc.downstream, sc.services)
            if f"{name}_calls" in c.timeseries]


def _tier_row(ax, name: str, ts, width: float, line: dict) -> None:
    """One tier's calls/s (thick) and failed calls/s (thin) for one arm."""
    ax.plot(ts["time"] + width / 2, ts[f"{name}_calls"] / width, **line)
    ax.plot(ts["time"] + width / 2, ts[f"{name}_failed"] / width,
            **{**line, "lw": 0.9, "alpha": 0.7})
    ax.set_ylabel("calls/s")


def _calls_row(ax, c: Comparison, arm: Arm, style: dict, replication: int) -> None:
    """One arm's calls per window: its own y scale up to its peak (and the capacity line,
    what the healthy downstream serves in the same window, unless it is over three times
    the peak: the title's ratio says it then, and the calls keep the row's height)."""
    time, calls, window, _ = call_counts(c, arm, replication)
    capacity = describe.capacity(arm.scenario)
    served = None if capacity is None else capacity * window
    ax.fill_between(time, calls, step="post", color=style["color"], alpha=0.35, lw=0)
    ax.step(time, calls, where="post", color=style["color"], lw=1.2)
    peak = calls.max(initial=0.0)
    span = format_duration(window)
    peak_text = f"peak {number_text(peak)} calls in {span}"
    far = served is not None and 0 < 3 * peak < served  # the line would flatten the row
    if served is not None:
        if not far:
            ax.axhline(served, **CAPACITY_STYLE)
        peak_text += f" = {number_text(peak / served)}× capacity"
    ax.set_title(arm.label, loc="left", color=style["color"], weight="bold", fontsize=14,
                 pad=3)
    ax.set_title(peak_text, loc="right", fontsize=13, pad=3,
                 weight="bold" if served and peak >= 2 * served else "normal")
    ax.set_ylim(0, 1.12 * max(peak, 0.0 if far else served or 0.0, 1.0))
    ax.set_yticks([0.0, peak] if peak > 0 else [0.0])  # a short row holds two labels
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: short_count(value)))
    if len(c.arms) <= SLIDE_ARMS:  # with more rows the heading's "Rows: calls" says it once
        ax.set_ylabel("calls", fontsize=12)


def short_count(value: float) -> str:
    """A count for a tick: ``0``, ``752``, ``1,025``, ``42.2k``, ``1.5M``."""
    if value < 10_000:
        return f"{value:,.0f}"
    return f"{value / 1e3:.3g}k" if value < 1e6 else f"{value / 1e6:.3g}M"


def _state_panel(ax, c: Comparison, styles: dict, replication: int, breaker: bool) -> None:
    for i, arm in enumerate(c.arms):
        ts = one(c.timeseries, arm.label, replication)
        time, width = ts["time"].to_numpy(), arm.scenario.bin
        color = styles[arm.label]["color"]
        down = _intervals(time, ts["downstream_up"].to_numpy() <= 0, width)
        ax.broken_barh(down, (i - 0.4, 0.8), facecolors=color)
        if breaker:
            opened = _intervals(time, ts["breaker_open"].to_numpy() > 0, width)
            ax.broken_barh(opened, (i - 0.4, 0.8), facecolors="none", edgecolors=color,
                           hatch="//", lw=0.8)
    ax.set_yticks(range(len(c.arms)), [arm.label for arm in c.arms], fontsize=11)
    ax.set_ylim(len(c.arms) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    ax.set_title("Downstream down (filled bars)"
                 + ("; circuit breaker open (hatched)" if breaker else ""), fontsize=13)

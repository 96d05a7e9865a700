"""Figures of a comparison (or of one run): ``timeline``, ``landing``, ``sleeps``, ``kpis``.

Built on matplotlib's object API (no pyplot state, no GUI backend): each function returns
a :class:`~matplotlib.figure.Figure` that Jupyter displays and ``savefig`` writes as PNG,
SVG or PDF, 16:9 unless many arms need more height. Colours come from the Okabe-Ito and Tol
palettes (safe for colour-blind readers) and are fixed per strategy name; arms of one
strategy differ by line style. Titles say what the scenario contains and what was changed
from its bundled file; labels sit in titles and legends, never over the data.
"""

from __future__ import annotations

import textwrap

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

from herdsim.analysis.kpis import (
    BOUNDED,
    FIGURE,
    bounds,
    format_kpi,
    number_text,
    percent,
    show,
)
from herdsim.analysis.theory import binned, expected_counts, simulated_counts, sleep_prev
from herdsim.config import graph
from herdsim.config.durations import format_duration
from herdsim.model.downstream import family
from herdsim.plots import callgraph, coarse, describe
from herdsim.plots.kinds import FIGURES
from herdsim.plots.landing import landing
from herdsim.plots.style import (
    CAPACITY_STYLE,
    SLIDE_ARMS,
    STRATEGY_COLORS,
    STYLE,
    WIDE,
    Arm,
    Comparison,
    Figure,
    arm_styles,
    one,
    shade_outages,
    strategy_color,
    wide_size,
)

THEORY_CDF = "theory (strategy cdf)"
__all__ = ["FIGURES", "STRATEGY_COLORS", "STYLE", "Figure", "arm_styles", "binned", "call_counts",
           "draw", "expected_counts", "simulated_counts", "sleep_prev", "strategy_color"]


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
        height = WIDE[1] if nrows <= 2 else 4.2 * nrows  # 16:9 up to 8 arms
        fig = Figure(figsize=(WIDE[0], height), layout="constrained")
        axes = fig.subplots(nrows, cols, squeeze=False).ravel()
        for ax in axes[len(arms):]:
            ax.set_visible(False)
        for ax, arm in zip(axes, arms, strict=False):
            data = c.sleeps[c.sleeps["arm"] == arm.label]
            edges = _sleep_edges(data["sleep"])
            ordered = sleep_prev(data, arm.scenario.retry.base)
            if len(ordered) and not ordered["sleep"].gt(0).any():  # nothing to histogram
                ax.set_title(f"{arm.label}\n{len(ordered):,} sleeps", fontsize=14,
                             color=styles[arm.label]["color"])
                ax.text(0.5, 0.5, "every sleep is 0 s:\nretries at once", ha="center",
                        va="center", transform=ax.transAxes, fontsize=13)
                ax.set_xticks([])
                ax.set_yticks([])
                continue
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
            ax.set_title(_wrapped(f"{arm.label}\n{note}", cols), fontsize=14,
                         color=styles[arm.label]["color"])
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.xaxis.set_major_locator(MaxNLocator(4))  # short labels never overlap
            ax.set_xlabel("sleep before retry (s)")
            ax.set_ylabel(f"sleeps per {edges[1] - edges[0]:g} s bin")
        handles = [Line2D([], [], color="0.5", lw=8, alpha=0.55, label="simulated sleeps"),
                   Line2D([], [], color="black", lw=2, label="theory (expected count)")]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
        pooled = " (all replications)" if c.replications > 1 else ""
        fig.suptitle(describe.heading(c, f"how retry sleeps are spread{pooled}"),
                     fontsize=14, fontweight="normal")
    return fig


def _wrapped(text: str, columns: int, size: float = 14) -> str:
    """*text* with each line wrapped to the width of one of *columns* panels side by side."""
    width = max(16, int(WIDE[0] / columns * 0.9 * 72 / (0.6 * size)))
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


def _theory(arm: Arm, ordered: pd.DataFrame, edges: np.ndarray) -> tuple[np.ndarray | None, str]:
    try:
        strategy = arm.scenario.retry.build()
    except ValueError:
        return None, "strategy not importable here:\nno theory shown"
    if len(ordered) == 0:
        return None, "no retries"
    if callable(getattr(strategy, "cdf", None)):
        return expected_counts(strategy, ordered, edges), THEORY_CDF
    sample = _some_jobs(ordered)
    counts = simulated_counts(strategy, sample, edges, arm.scenario.retry.base)
    if len(sample) == len(ordered):
        return counts, "theory by Monte Carlo (no cdf)"
    return (counts * len(ordered) / len(sample),
            f"theory by Monte Carlo (no cdf; {len(sample):,} sleeps redrawn)")


MONTE_CARLO_SLEEPS = 100_000  # sleeps redrawn for a strategy without a cdf, at most


def _some_jobs(ordered: pd.DataFrame) -> pd.DataFrame:
    """*ordered* (job order, see :func:`sleep_prev`), or beyond :data:`MONTE_CARLO_SLEEPS`
    the sleeps of a fixed-seed random share of its jobs (whole chains, since a job's sleep
    depends on its previous one): the expected histogram scaled up is unbiased, and a
    storm's millions of sleeps are not redrawn one Python call at a time."""
    if len(ordered) <= MONTE_CARLO_SLEEPS:
        return ordered
    keys = ordered["replication"].to_numpy() * (int(ordered["job"].max()) + 1) \
        + ordered["job"].to_numpy()
    jobs = np.unique(keys)
    share = MONTE_CARLO_SLEEPS / len(ordered)
    kept = np.random.default_rng(0).random(len(jobs)) < share
    return ordered[np.isin(keys, jobs[kept])]


SUCCEEDED = ("Succeeded", "% of jobs submitted")


def _kpi_panels(c: Comparison, ranked: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """The KPI panels with something to show: succeeded always; recovery only after an
    outage; peak over capacity only when a capacity binds; dead-lettered when any was."""
    panels = {"succeeded_pct": SUCCEEDED}
    for key, value in FIGURE.items():
        if key == "recovery_time" and not c.scenario.all_outages:
            continue
        if key == "peak_to_capacity" and describe.capacity(c.scenario) is None:
            continue
        if key == "jobs_dead_lettered" and not ranked[key].fillna(0).gt(0).any():
            continue
        panels[key] = value
    return panels


def _succeeded_pct(ranked: pd.DataFrame) -> pd.DataFrame:
    if "succeeded_fraction" in ranked:
        return ranked.assign(succeeded_pct=100 * ranked["succeeded_fraction"],
                             succeeded_pct_ci95=100 * ranked.get("succeeded_fraction_ci95",
                                                                 np.nan))
    share = ranked["jobs_succeeded"] / ranked["jobs_submitted"].where(
        ranked["jobs_submitted"] > 0)
    return ranked.assign(succeeded_pct=100 * share)


def kpis(c: Comparison) -> Figure:
    """The key numbers per arm (best first when replicated), with 95% CIs when replicated;
    only the panels with something to show, the share of jobs succeeded always."""
    ranked = _succeeded_pct(c.ranked())
    styles = arm_styles(c.arms)
    n = len(ranked)
    window = format_duration(c.scenario.peak_window)
    panels = _kpi_panels(c, ranked)
    outage = bool(c.scenario.all_outages)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=wide_size(n, 0.6), layout="constrained")
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        y = np.arange(n)
        for ax, (key, (title, unit)) in zip(axes, panels.items(), strict=True):
            values = ranked[key].to_numpy(dtype=float)
            ci = ranked.get(f"{key}_ci95")
            err = None if ci is None or pd.isna(ci).all() else ci.to_numpy(dtype=float)
            colors = [styles[label]["color"] for label in ranked["arm"]]
            ax.barh(y, np.nan_to_num(values), xerr=err, color=colors, alpha=0.8,
                    error_kw={"ecolor": "0.2", "capsize": 4})
            finite = values[np.isfinite(values)]
            span = finite.max() if finite.size and finite.max() > 0 else 1.0
            if key in BOUNDED:  # room for the upper bounds
                uppers = [bounds(key, c.context(row)) for _, row in ranked.iterrows()]
                span = max([span, *(b[1] for b in uppers if b is not None and b[1] is not None)])
            right_edge = span * 1.15  # where an unbounded range's arrow points
            missing = ("not recovered\nwithin the run" if key == "recovery_time" and outage
                       else c.missing(key))
            for i, (yi, value) in enumerate(zip(y, values, strict=True)):
                spread = 0.0 if err is None or not np.isfinite(err[i]) else err[i]
                row = ranked.iloc[i]
                text = (format_kpi(value, missing=missing) if key == "succeeded_pct"
                        or not np.isfinite(value) else show(key, value, c.context(row)))
                found = bounds(key, c.context(row)) if key in BOUNDED else None
                if found is not None and found[1] != found[0]:  # the range it lies in
                    high = right_edge if found[1] is None else found[1]
                    ax.plot([found[0], high], [yi, yi], color="0.2", lw=2.5,
                            marker=">" if found[1] is None else "|", markevery=[1])
                    spread = max(spread, high - value)
                ax.text((value + spread if np.isfinite(value) else 0) + span * 0.03, yi,
                        text + ("%" if key == "succeeded_pct" and np.isfinite(value) else ""),
                        va="center", fontsize=13,
                        weight="bold" if not np.isfinite(value) else "normal")
            if key == "peak_to_capacity":
                ax.axvline(1.0, **CAPACITY_STYLE)
            right = span + (0 if err is None else float(np.nanmax(err, initial=0)))
            ax.set_xlim(0, right * 1.45)
            ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(4))
            if key == "succeeded_pct":
                ax.set_xticks([0, 50, 100])
            if not finite.size:
                ax.set_xticks([])  # nothing to measure: no scale
            if span >= 1e4:
                ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_title(textwrap.fill(title.format(window=window), _chars(len(panels), 15)))
            ax.set_xlabel(textwrap.fill(unit.format(window=window), _chars(len(panels), 12)),
                          fontsize=12)
            ax.grid(axis="y", visible=False)
        axes[0].set_yticks(y, ranked["arm"])
        axes[0].set_ylim(n - 0.5, -0.5)
        if c.replications > 1:
            what = (f"key numbers per arm, best first; bars: mean of {c.replications} "
                    "replications ± 95% CI")
        elif n > 1:
            what = "key numbers per arm (one run each: not a ranking)"
        else:
            what = "key numbers of the run"
        fig.suptitle(describe.heading(c, what), fontsize=14, fontweight="normal")
    return fig


def _chars(panels: int, size: float) -> int:
    """Characters of a *size*-point text that fit one of *panels* side by side on a 16-inch
    figure (a character is about 0.6 em wide; a fifth of each panel left for its margins),
    never more than 24."""
    return max(10, min(24, int(WIDE[0] / panels * 0.8 * 72 / (0.6 * size))))


PLOTS = {"timeline": timeline, "landing": landing, "sleeps": sleeps, "kpis": kpis,
         "graph": callgraph.graph}
BY_TIME = ("timeline",)  # drawn from the time series (landing thins its own 10 ms steps)


def draw(c: Comparison, kind: str) -> Figure:
    """The figure *kind* (``timeline``, ``landing``, ``sleeps`` or ``kpis``) of *c*."""
    if kind not in PLOTS:
        raise ValueError(f"unknown plot {kind!r}; choose one of {', '.join(PLOTS)}")
    if kind not in BY_TIME:
        return PLOTS[kind](c)
    drawn, note = coarse.for_drawing(c)
    figure = PLOTS[kind](drawn)
    if note:  # under everything, where the layout makes room for it
        figure.supxlabel(note, fontsize=11, color="0.35")
    return figure

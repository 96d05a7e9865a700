"""``timeline``: downstream calls per arm (a row each), successes, and the panels with
something to show below them (retries, tiers, backlog, admission, down and open)."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator, NullLocator

from herdsim.analysis.kpis import BY_KEY, number_text, percent
from herdsim.config import graph
from herdsim.plots import cache as cache_panels
from herdsim.plots import degradation as degradation_panels
from herdsim.plots import describe, replicas
from herdsim.plots import offered as offered_load
from herdsim.plots.style import (
    CAPACITY_STYLE,
    SLIDE_ARMS,
    STYLE,
    TITLES_IN_PLACE,
    WIDE,
    Arm,
    Comparison,
    Figure,
    arm_styles,
    fitted,
    legend_columns,
    one,
    outage_key,
    shade_outages,
    text_width,
    wide_size,
)
from herdsim.policies import downstreams
from herdsim.policies.durations import format_duration

# Rows whose peaks differ by more than this share a logarithmic scale: on a linear one the
# lowest peak would fill under 2% of its row (a pixel or two), nothing a reader can see.
LOG_RATIO = 50.0
FLOOR = 0.5  # calls: where a logarithmic row starts (an empty window sits on it)
ROW_WIDTH = WIDE[0] * 72 * 0.84  # points a calls row's titles may fill (ticks aside)
UNIT, HEAD = 0.5, 2.5  # inches: a calls row's share of the height; heading and legend


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
        "up/down": bool(ts["downstream_up"].le(0).any()) or breaker,
        "breaker": breaker,
        "admission": "admission_limit" in ts and bool(ts["admission_limit"].notna().any()),
        "connected": "connected" in ts,  # a model whose clients hold connections
        "degradation": "degradation" in ts and bool(ts["degradation"].gt(1).any()),
    }


def _succeeded(c: Comparison, label: str, replication: int) -> str:
    runs = c.runs[(c.runs["arm"] == label) & (c.runs["replication"] == replication)]
    if runs.empty or not runs["jobs_submitted"].iloc[0]:
        return ""
    share = BY_KEY["succeeded_fraction"].column(runs).iloc[0]  # an old directory: computed
    return f" ({percent(float(share))} succeeded)"


def timeline(c: Comparison, replication: int = 0) -> Figure:
    """Calls/s per arm (one row each), successes/s, and only the panels with something to
    show: retries/s, backlog (closed loop), the admission limit against the calls admitted,
    downstream down and breaker open."""
    arms, styles, base = c.arms, arm_styles(c.arms), c.scenario
    n = len(arms)
    show = _panels(c, replication)
    extra = ["success"] + [k for k in ("connected", "retries", "backlog", "admission",
                                       "degradation", "up/down") if show[k]]
    extra += degradation_panels.keys(c.timeseries)  # a graph's degrading services
    extra[1:1] = [f"tier:{name}" for name in tier_names(c)]  # a call graph: a row per tier
    extra[1:1] = cache_panels.keys(c.timeseries)  # a cache: its hit rate
    downs = tier_downs(c, replication)  # and a down row per lower tier that went down
    extra += [f"down:{name}" for name in downs]
    strips = {f"replicas:{arm.label}": arm for arm in replicas.strip_arms(c)}
    extra[1:1] = list(strips)  # a fleet: a heat strip of its replicas per arm
    heights = [1.0] * n + [0.45 * n + 0.5 if k == "up/down" or k.startswith("down:")
                           else replicas.strip_height(c) if k in strips else 1.9
                           for k in extra]
    right = active_until(c, replication)
    with mpl.rc_context(STYLE):
        width, height = wide_size(n, 1.5)
        # many panels (a call graph's) make it taller, never its rows thinner than ~1/2 inch
        fig = Figure(figsize=(width, max(height, UNIT * sum(heights) + HEAD)),
                     layout="constrained")
        grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
        top = fig.add_subplot(grid[0])
        rows = [top] + [fig.add_subplot(grid[i], sharex=top) for i in range(1, n)]
        # (a calls row's titles, 3 points above it, keep matplotlib's search: it lifts
        # their descenders clear of the row)
        with mpl.rc_context(TITLES_IN_PLACE):
            panels = {k: fig.add_subplot(grid[n + i], sharex=top) for i, k in enumerate(extra)}
        counts = {arm.label: call_counts(c, arm, replication) for arm in arms}
        scale = _shared_scale(arms, counts)
        names = describe.short_labels(arms)
        for ax, arm in zip(rows, arms, strict=True):
            _calls_row(ax, arm, counts[arm.label], scale, styles[arm.label], names[arm.label],
                       n)
        what = counts[arms[-1].label][3]
        capacity = describe.capacity(base)
        cap_text = ("" if capacity is None else
                    "; dashed: what capacity serves in that window")
        grey = outage_key(base)
        shared = ("" if n == 1 else ", on one shared logarithmic scale" if scale[1]
                  else ", on one shared scale")
        explain = f"{'Rows' if n > 1 else 'Top row'}: downstream {what}{shared}{cap_text}{grey}"
        for ax in [*rows, *panels.values()]:
            shade_outages(ax, base)
            ax.tick_params(labelbottom=False)
        _draw_arms(panels, c, styles, names, replication)
        ax = panels["success"]
        offered = ""
        if downstreams.named(base.downstream.model).queueing:
            offered = offered_load.draw(ax, c, base, replication)
        model = downstreams.named(base.downstream.model)
        ax.set_title(f"{model.successes} per second (per {format_duration(base.bin)} bin)"
                     f"{offered}", fontsize=13)
        ax.set_ylabel("jobs/s")
        # the arms' legend in a band of its own under the panels (no blank band beside one)
        handles, texts = ax.get_legend_handles_labels()
        fig.legend(handles, texts, loc="outside lower center", frameon=False,
                   handlelength=2.4, fontsize=12, ncols=legend_columns(texts, 12))
        _label_panels(panels, base)
        if "up/down" in panels:
            _state_panel(panels["up/down"], c, styles, names, replication, show["breaker"])
        for name, spans in downs.items():
            _down_panel(panels[f"down:{name}"], c, name, spans, styles, names)
        top_rate = replicas.peak(c, list(strips.values()), replication)
        for key, arm in strips.items():
            replicas.draw_strip(panels[key], c, arm, names[arm.label], replication, top_rate)
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


def _draw_arms(panels: dict, c: Comparison, styles: dict, names: dict[str, str],
               replication: int) -> None:
    """Each arm's line in every panel below the rows: successes, retries, a tier's calls,
    the backlog, the admission limit against the calls admitted."""
    for arm in c.arms:
        ts = one(c.timeseries, arm.label, replication)
        line = {**styles[arm.label], "lw": 2.0}
        width = arm.scenario.bin
        panels["success"].plot(ts["time"] + width / 2, ts["success"] / width,
                               label=names[arm.label] + _succeeded(c, arm.label, replication),
                               **line)
        if "retries" in panels:
            panels["retries"].plot(ts["time"] + width / 2, ts["retry"] / width, **line)
        for key in panels:
            if key.startswith("tier:"):
                _tier_row(panels[key], key[5:], ts, width, line)
            elif key.startswith(cache_panels.PANEL):
                cache_panels.draw(panels[key], key, ts, width, line)
            elif key.startswith(degradation_panels.PANEL):
                degradation_panels.draw(panels[key], key, ts, line)
        if "backlog" in panels:
            panels["backlog"].plot(ts["time"], ts["queue_depth"], **line)
        if "connected" in panels:
            panels["connected"].step(ts["time"], ts["connected"], where="post", **line)
        if "admission" in panels and ts["admission_limit"].notna().any():
            admitted = ts["in_flight"] + ts["waiting"]
            panels["admission"].plot(ts["time"], admitted, **{**line, "lw": 1.0,
                                                               "alpha": 0.6})
            panels["admission"].step(ts["time"], ts["admission_limit"], where="post",
                                     **line)
        if "degradation" in panels and ts["degradation"].notna().any():
            panels["degradation"].plot(ts["time"], ts["degradation"], **line)


def _rate_text(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _label_panels(panels: dict, base) -> None:
    """Titles, units and y axes (from 0, engineering notation) of the panels below."""
    if "retries" in panels:
        panels["retries"].set_title("Retry sleeps started per second "
                                    f"(per {format_duration(base.bin)} bin)", fontsize=13)
        panels["retries"].set_ylabel("retries/s")
    if "degradation" in panels:
        panels["degradation"].set_title("Degradation: the factor on the service time "
                                        "(downstream.degradation, at each bin start)",
                                        fontsize=13)
        panels["degradation"].set_ylabel("× service")
    if "backlog" in panels:
        panels["backlog"].set_title("Main-queue backlog (jobs waiting for a worker)",
                                    fontsize=13)
        panels["backlog"].set_ylabel("jobs")
        panels["backlog"].yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    if "admission" in panels:
        panels["admission"].set_title("Admission limit (thick) and calls in service or "
                                      "waiting (thin)", fontsize=13)
        panels["admission"].set_ylabel("calls")
    if "connected" in panels:
        limit = getattr(base.downstream.broker, "max_connections", None)
        note = "" if limit is None else "; dotted: max_connections"
        if limit is not None:
            panels["connected"].axhline(limit, color="0.3", linestyle=":", lw=1.6)
        panels["connected"].set_title("Clients connected (at each bin start; the rest back "
                                      f"off or connect){note}", fontsize=13)
        panels["connected"].set_ylabel("clients")
    for key in (k for k in panels if k.startswith(cache_panels.PANEL)):
        cache_panels.label(panels[key], key, format_duration(base.bin))
    for key in (k for k in panels if k.startswith(degradation_panels.PANEL)):
        degradation_panels.label(panels[key], key)
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
    # from 0, a service's factor too: autoscaled, a wobble of 1.056-1.058 read as a fall
    service_factors = [k for k in panels if k.startswith(degradation_panels.PANEL)]
    for key in ("success", "connected", "retries", "backlog", "admission", "degradation",
                *service_factors, *tier_keys):
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


def _served(arm: Arm, window: float) -> float | None:
    """What the healthy downstream of *arm* serves in *window* seconds (None: unbounded)."""
    capacity = describe.capacity(arm.scenario)
    return None if capacity is None else capacity * window


def _shared_scale(arms: list[Arm], counts: dict) -> tuple[float, bool]:
    """``(top, log)``: the y limit every calls row shares (the highest peak, and each
    capacity line not more than three times above it), and whether the peaks differ by
    more than :data:`LOG_RATIO` (then the scale is logarithmic, so a few calls still show
    beside thousands)."""
    peaks = [float(counts[arm.label][1].max(initial=0.0)) for arm in arms]
    highest = max([*peaks, 1.0])
    lines = [served for arm in arms
             if (served := _served(arm, counts[arm.label][2])) is not None
             and served <= 3 * highest]
    positive = [peak for peak in peaks if peak > 0]
    log = bool(positive) and max(positive) / min(positive) > LOG_RATIO
    return max([highest, *lines]), log


def _calls_row(ax, arm: Arm, counted: tuple, scale: tuple[float, bool], style: dict,
               name: str, n: int) -> None:
    """One arm's calls per window on the scale all rows share, its peak on the right and
    as a tick, and the capacity line (what the healthy downstream serves in the same
    window) unless it is over three times the highest peak: the title's ratio says it."""
    time, calls, window, _ = counted
    top, log = scale
    served = _served(arm, window)
    shown = np.where(calls > 0, calls, FLOOR) if log else calls
    if not log:  # filled down to a log scale's floor, a small steady load would look heavy
        ax.fill_between(time, shown, step="post", color=style["color"], alpha=0.35, lw=0)
    ax.step(time, shown, where="post", color=style["color"], lw=1.2)
    peak = float(calls.max(initial=0.0))
    peak_text = f"peak {number_text(peak)} calls in {format_duration(window)}"
    if served is not None:
        if served <= top:
            ax.axhline(served, **CAPACITY_STYLE)
        peak_text += f" = {number_text(peak / served)}× capacity"
    room = ROW_WIDTH - text_width(peak_text, 13) - 30  # the arm's name never runs into it
    ax.set_title(fitted(name, room, 14, bold=True), loc="left", color=style["color"],
                 weight="bold", fontsize=14, pad=3)
    ax.set_title(peak_text, loc="right", fontsize=13, pad=3,
                 weight="bold" if served and peak >= 2 * served else "normal")
    if log:
        ax.set_yscale("log")
        ax.set_ylim(FLOOR, top * 2.0)
        ticks = [peak] if peak >= 1 else []
        if peak >= 10 and np.log(peak) >= 0.6 * np.log(4 * top):  # room for a second label
            ticks.insert(0, 1.0)
        ax.yaxis.set_minor_locator(NullLocator())
    else:
        ax.set_ylim(0, 1.12 * top)
        # two labels close together in a short row would overlap: the peak's says more
        ticks = [0.0] if peak <= 0 else [0.0, peak] if peak >= 0.5 * top else [peak]
    ax.set_yticks(ticks)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: short_count(value)))
    if n <= SLIDE_ARMS:  # with more rows the heading's "Rows: calls" says it once
        ax.set_ylabel("calls", fontsize=12)


def short_count(value: float) -> str:
    """A count for a tick: ``0``, ``752``, ``1,025``, ``42.2k``, ``1.5M``."""
    if value < 10_000:
        return f"{value:,.0f}"
    return f"{value / 1e3:.3g}k" if value < 1e6 else f"{value / 1e6:.3g}M"


def _state_panel(ax, c: Comparison, styles: dict, names: dict[str, str], replication: int,
                 breaker: bool) -> None:
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
    _arm_rows(ax, c, names)
    top = f"{c.scenario.downstream.name or 'downstream'} (the workers' downstream)" \
        if c.scenario.services else "Downstream"
    ax.set_title(f"{top} down (filled bars)"
                 + ("; circuit breaker open (hatched)" if breaker else ""), fontsize=13)


def _arm_rows(ax, c: Comparison, names: dict[str, str]) -> None:
    """A panel of one bar row per arm, named on the left, first arm on top."""
    ax.set_yticks(range(len(c.arms)), [names[arm.label] for arm in c.arms], fontsize=11)
    ax.set_ylim(len(c.arms) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)


def tier_downs(c: Comparison, replication: int = 0) -> dict[str, dict[str, list]]:
    """``tier -> arm label -> [(start, length), ...]``: when each lower tier of a call graph
    was down, its ``down`` outages and each crash until its restart (the workers'
    downstream has its own gauge, ``downstream_up``); tiers never down are left out, and
    so are crashes a directory saved before ``crashes.csv`` existed does not list."""
    found: dict[str, dict[str, list]] = {}
    for name in tier_names(c)[1:]:
        spans = {}
        for arm in c.arms:
            tier = graph.tiers(arm.scenario.downstream, arm.scenario.services)[name]
            mine = [(o.start, o.duration) for o in tier.outages if o.refuses]
            collapse = tier.overload.collapse
            if c.crashes is not None and collapse is not None:
                crashed = one(c.crashes, arm.label, replication)
                mine += [(float(t), collapse.restart_time)
                         for t in crashed.loc[crashed["tier"] == name, "time"]]
            spans[arm.label] = mine
        if any(spans.values()):
            found[name] = spans
    return found


def _down_panel(ax, c: Comparison, name: str, spans: dict[str, list], styles: dict,
                names: dict[str, str]) -> None:
    """One lower tier's down periods, a bar row per arm, its crashes counted per arm."""
    for i, arm in enumerate(c.arms):
        ax.broken_barh(spans[arm.label], (i - 0.4, 0.8),
                       facecolors=styles[arm.label]["color"])
    _arm_rows(ax, c, names)
    collapse = graph.tiers(c.scenario.downstream, c.scenario.services)[name].overload.collapse
    crash = ("" if collapse is None else
             f"; a crash keeps it down {format_duration(collapse.restart_time)}")
    ax.set_title(f"{name} down (filled bars: a down outage{crash})", fontsize=13)

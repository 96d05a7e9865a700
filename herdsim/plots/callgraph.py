"""The call graph itself (figure kind ``graph``): one panel per arm, a box per tier, an
arrow per edge.

Tiers are laid out by depth, the workers' downstream at the top and every tier one row
below the deepest tier that calls it (the graph is a DAG from the top tier), each row in
the order its callers stand (the mean position of the tiers that call it). A box gives the
tier's name, its capacity (concurrency / mean service time), its state in that arm and
its crashes and peak (and its cache's hit rate over the run, for a tier with a cache), and
is tinted by that state (the metastability map's colours; grey when the saved run has no
tier states); the headline tier's box has a thick border.
An arrow is labelled with what one call down that edge carries: ``count`` in parallel,
the timeout, and the retry policy (strategy and ``max_retries``) or the hedging (delay
and copies), with a budget, a breaker and a propagated deadline when set.

Everything is read from the arms' resolved scenarios and the comparison's summary, never
from the code a scenario names (a strategy given as ``module:Class`` is only its name).
"""

from __future__ import annotations

import math
import textwrap

import matplotlib as mpl
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.patches import Patch

from herdsim.analysis.kpis import number_text
from herdsim.config import graph as config_graph
from herdsim.plots import describe
from herdsim.plots.metastability_map import COLORS
from herdsim.plots.style import STYLE, WIDE, Arm, Comparison, Figure
from herdsim.policies.durations import format_duration

UNKNOWN = "#BBBBBB"  # a tier whose state the saved run does not hold
TINT = 0.6  # the state's colour under a box's text: black text stays readable on each
MAX_COLUMNS = 4  # panels side by side at most (8 arms: 2 rows of 4)


def depths(tiers: dict[str, config_graph.Caller]) -> dict[str, int]:
    """Each tier's depth: 0 for the top (the first), else one more than its deepest
    caller's (a longest path, so every arrow points down); a tier no path reaches sits
    one row below the deepest."""
    top = next(iter(tiers))
    depth = {top: 0}
    changed = True
    while changed:  # a DAG: at most len(tiers) rounds
        changed = False
        for name, tier in tiers.items():
            if name not in depth:
                continue
            for edge in tier.calls:
                if depth.get(edge.service, -1) < depth[name] + 1:
                    depth[edge.service] = depth[name] + 1
                    changed = True
    lowest = max(depth.values())
    return {name: depth.get(name, lowest + 1) for name in tiers}


def layout(tiers: dict[str, config_graph.Caller]) -> dict[str, tuple[float, float]]:
    """``name -> (x, y)``: y = -depth, x in (0, 1), each row spread evenly in the order of
    its callers' mean x (as listed for the top row and for ties)."""
    depth = depths(tiers)
    callers: dict[str, list[str]] = {name: [] for name in tiers}
    for name, tier in tiers.items():
        for edge in tier.calls:
            callers[edge.service].append(name)
    where: dict[str, tuple[float, float]] = {}
    order = list(tiers)
    for level in range(max(depth.values()) + 1):
        row = [name for name in order if depth[name] == level]
        row.sort(key=lambda n: sum(where[c][0] for c in callers[n] if c in where)
                 / max(1, sum(c in where for c in callers[n])) if callers[n] else 0.5)
        for i, name in enumerate(row):
            where[name] = ((i + 1) / (len(row) + 1), -float(level))
    return where


def edge_text(edge: config_graph.Edge, deadline: str | None) -> str:
    """What one call down *edge* carries, on up to three short lines."""
    first = [f"×{edge.count} in parallel"] if edge.count > 1 else []
    first.append("no timeout" if edge.timeout is None
                 else f"timeout {format_duration(edge.timeout)}")
    if edge.hedging is not None:
        h = edge.hedging
        policy = f"hedge every {format_duration(h.delay)}, ≤{h.max_attempts} copies"
    else:
        r = edge.retry
        name = r.preset or r.strategy.rpartition(":")[2]
        limit = ("no retry limit" if r.max_retries is None else "no retries"
                 if r.max_retries == 0 else f"≤{r.max_retries} retries")
        policy = limit if r.max_retries == 0 else f"{name} {limit}"
    extra = []
    if edge.budget is not None:
        extra.append(f"budget {edge.budget.kind}")
    if edge.breaker.enabled:
        extra.append("breaker")
    if (edge.deadline or deadline) == "propagate":
        extra.append("deadline propagated")
    return "\n".join([", ".join(first), policy] + ([", ".join(extra)] if extra else []))


def workers_text(arm: Arm) -> str:
    """The workers' own edge: how many call the top tier, its timeout and their retries."""
    sc = arm.scenario
    who = (f"{sc.workers.count:,} workers" if sc.workers.count is not None
           else "open loop (a caller per job)")
    timeout = getattr(sc.downstream, "timeout", None)
    r = sc.retry
    limit = "no retry limit" if r.max_retries is None else f"≤{r.max_retries} retries"
    policy = (f"hedge every {format_duration(sc.hedging.delay)}" if sc.hedging is not None
              else "no retries" if r.max_retries == 0
              else f"{r.preset or r.strategy.rpartition(':')[2]} {limit}")
    when = "no timeout" if timeout is None else f"timeout {format_duration(timeout)}"
    return f"{who}: {when}, {policy}"


def tier_numbers(c: Comparison, arm: Arm, names: list[str]) -> dict[str, dict]:
    """Each tier's ``state`` (None when not saved), ``collapses``, ``peak_to_capacity``
    and ``cache_hit_rate`` for *arm* (its summary row: states by majority, numbers as
    means), and which is the ``headline``."""
    summary = c.ranked()  # the comparison's summary (its order does not matter here)
    rows = summary[summary["arm"] == arm.label]
    row = rows.iloc[0] if len(rows) else pd.Series(dtype=object)

    def get(key: str):
        value = row.get(key)
        return None if value is None or (not isinstance(value, str) and pd.isna(value)) \
            else value

    headline = get("headline_tier")
    return {name: {"state": get(f"tiers.{name}.state"),
                   "collapses": get(f"tiers.{name}.collapses"),
                   "peak_to_capacity": get(f"tiers.{name}.peak_to_capacity"),
                   "cache_hit_rate": get(f"tiers.{name}.cache_hit_rate"),
                   "headline": name == headline} for name in names}


def _box_text(name: str, tier: config_graph.Caller, numbers: dict) -> str:
    state = numbers["state"] or "state n/a"
    lines = [name, f"capacity {number_text(tier.capacity_rate())} calls/s", state]
    said = []
    if numbers["collapses"]:
        n = int(numbers["collapses"])
        said.append(f"{n} crash{'es' * (n != 1)}")
    if numbers["peak_to_capacity"] is not None:
        said.append(f"peak {number_text(float(numbers['peak_to_capacity']))}× capacity")
    if said:
        lines.append(", ".join(said))
    if tier.cache is not None and numbers["cache_hit_rate"] is not None:
        lines.append(f"cache hit rate {float(numbers['cache_hit_rate']):.0%} over the run")
    return "\n".join(lines)


def _panel(ax, c: Comparison, arm: Arm, size: float, width: int) -> None:
    sc = arm.scenario
    tiers = config_graph.tiers(sc.downstream, sc.services)
    where = layout(tiers)
    numbers = tier_numbers(c, arm, list(tiers))
    lowest = min(y for _, y in where.values())
    ax.set_xlim(0, 1)
    ax.set_ylim(lowest - 0.45, 0.75)
    ax.axis("off")
    boxes = {}
    for name, (x, y) in where.items():
        mine = numbers[name]
        color = COLORS.get(mine["state"], UNKNOWN)
        box = ax.text(x, y, _box_text(name, tiers[name], mine), ha="center", va="center",
                      fontsize=size, linespacing=1.25, zorder=3,
                      bbox={"boxstyle": "round,pad=0.5", "facecolor": to_rgba(color, TINT),
                            "edgecolor": "black",
                            "linewidth": 3.5 if mine["headline"] else 1.0})
        box.set_gid(f"tier:{name}")
        boxes[name] = box
    top = next(iter(tiers))
    workers = ax.annotate(textwrap.fill(workers_text(arm), width), xy=(0.5, 1.0),
                          xycoords=boxes[top], xytext=(where[top][0], 0.62),
                          textcoords="data", ha="center", va="center", fontsize=size * 0.9,
                          arrowprops={"arrowstyle": "-|>", "color": "0.35", "lw": 1.4},
                          zorder=2)
    workers.set_gid("workers")
    for name, tier in tiers.items():
        seen: dict[str, int] = {}
        for i, edge in enumerate(tier.calls):
            k = seen[edge.service] = seen.get(edge.service, -1) + 1  # the same pair again
            arrow = ax.annotate("", xy=(0.5, 1.0), xycoords=boxes[edge.service],
                                xytext=(0.5, 0.0), textcoords=boxes[name],
                                arrowprops={"arrowstyle": "-|>", "color": "0.2", "lw": 1.6,
                                            "connectionstyle": f"arc3,rad={0.25 * k}"},
                                zorder=1)
            arrow.set_gid(f"edge:{name}->{edge.service}:{i}")
            (x0, y0), (x1, y1) = where[name], where[edge.service]
            label = ax.text((x0 + x1) / 2 + 0.02 + 0.12 * k, (y0 + y1) / 2,
                            edge_text(edge, sc.deadline), ha="left", va="center",
                            fontsize=size * 0.85, zorder=4, color="0.1",
                            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white",
                                  "edgecolor": "0.8", "alpha": 0.9})
            label.set_gid(f"edge-label:{name}->{edge.service}:{i}")


def graph(c: Comparison) -> Figure:
    """The call graph of each arm (a grid of panels, up to :data:`MAX_COLUMNS` wide), each
    tier coloured by its state in that arm."""
    n = len(c.arms)
    cols = min(n, MAX_COLUMNS if n > 4 else 2 if n == 4 else n)
    rows = math.ceil(n / cols)
    size = 13.0 if cols == 1 else 11.0 if cols == 2 else 9.5
    height = WIDE[1] if rows == 1 else max(WIDE[1], 5.0 * rows + 1.5)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(WIDE[0], height), layout="constrained")
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, arm in zip(axes, c.arms, strict=False):
            _panel(ax, c, arm, size, 80 if cols == 1 else 48 if cols == 2 else 34)
            if n > 1:
                ax.set_title("\n".join(textwrap.fill(part, 60, break_long_words=False)
                                       for part in arm.label.split(", ")),
                             fontsize=size + 1, loc="center")  # a setting a line
        for ax in axes[n:]:
            ax.set_visible(False)
        handles = [Patch(facecolor=to_rgba(COLORS[s], TINT), edgecolor="0.3", label=s)
                   for s in COLORS]
        handles.append(Patch(facecolor="white", edgecolor="black", linewidth=3,
                             label="headline tier (the worst)"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                   frameon=False, fontsize=12)
        explain = ("Boxes: tiers by depth, capacity = concurrency / mean service time, "
                   f"peak = calls in the busiest {format_duration(c.scenario.peak_window)} "
                   "over what capacity serves in it; arrows: calls, labelled count, timeout, "
                   "retries or hedging")
        fig.suptitle(describe.heading(c, "the call graph, each tier by its state",
                                      explain=explain), fontsize=14, fontweight="normal")
    return fig

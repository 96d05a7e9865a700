"""A tier's replicas in the timeline: one heat strip per arm, a row per replica, its
calls per second by colour, grey where it was out (ejected, or failing its health
checks). Only for a run with ``replica{i}_calls`` columns (a tier with ``replicas``), or
a call graph's ``<service>_replica{i}_calls`` (a service with replicas: the first one's
strip when the workers' downstream has none)."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np

from herdsim.plots.style import one

MAX_STRIPS = 4  # arms with a strip of their own; more would crowd the figure


def prefix(columns) -> str:
    """The strip's tier as its columns' prefix: ``""`` for the workers' downstream,
    ``"<service>_"`` for a service's fleet."""
    if "replica0_calls" in columns:
        return ""
    found = next((str(c) for c in columns if str(c).endswith("_replica0_calls")), None)
    return found[:-len("replica0_calls")] if found else ""


def replica_count(columns) -> int:
    """How many ``replica{i}_calls`` columns (of the strip's tier) the time series has."""
    n, tier = 0, prefix(columns)
    while f"{tier}replica{n}_calls" in columns:
        n += 1
    return n


def strip_arms(c) -> list:
    """The arms that get a strip: every arm, up to :data:`MAX_STRIPS`."""
    return list(c.arms[:MAX_STRIPS]) if replica_count(c.timeseries.columns) else []


def strip_height(c) -> float:
    """A strip's height in the timeline's units: thin rows, at least one panel's."""
    return min(4.0, 0.9 + 0.12 * replica_count(c.timeseries.columns))


def _rates(c, arm, replication: int):
    ts = one(c.timeseries, arm.label, replication)
    n, tier = replica_count(ts.columns), prefix(ts.columns)
    rates = np.array([ts[f"{tier}replica{i}_calls"].to_numpy() for i in range(n)])
    return ts, n, rates / c.scenario.bin


def peak(c, arms, replication: int) -> float:
    """The highest calls per second of any replica in any of *arms*: the strips' scale."""
    return max((float(_rates(c, arm, replication)[2].max(initial=0.0)) for arm in arms),
               default=0.0)


def draw_strip(ax, c, arm, name: str, replication: int, top: float) -> None:
    """Arm *arm*'s replicas: calls per second each, bin by bin, on the scale 0 to *top*
    every strip shares."""
    ts, n, rates = _rates(c, arm, replication)
    width = c.scenario.bin
    out = np.zeros_like(rates, dtype=bool)
    tier = prefix(ts.columns)
    if f"{tier}replica0_healthy" in ts:
        out = np.array([ts[f"{tier}replica{i}_healthy"].to_numpy() for i in range(n)]) < 0.5
    time = ts["time"].to_numpy()
    edges = np.append(time, time[-1] + width) if len(time) else np.array([0.0, width])
    shown = np.ma.masked_where(out, rates)
    ax.pcolormesh(edges, np.arange(n + 1) - 0.5, shown, shading="flat", vmin=0,
                  vmax=max(top, 1e-9), cmap=mpl.colormaps["viridis"].with_extremes(bad="0.75"))
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(0, n, max(1, -(-n // 5))))
    ax.set_ylabel("replica")
    grey = "; grey: out (ejected or failing health checks)" if out.any() else ""
    whose = f" of {tier[:-1]}" if tier else ""
    ax.set_title(f"{name}: calls per second to each replica{whose} (dark 0, bright {top:,.0f}, "
                 f"every strip){grey}", fontsize=12, loc="left")

"""``kpis``: the key numbers per arm, a panel each (95% CIs when replicated, the bounds of
a censored number as a range)."""

from __future__ import annotations

import textwrap

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.ticker import EngFormatter

from herdsim.analysis.kpis import BOUNDED, FIGURE, bounds, format_kpi, show
from herdsim.plots import describe
from herdsim.plots.style import (
    CAPACITY_STYLE,
    STYLE,
    WIDE,
    Comparison,
    Figure,
    arm_styles,
    wide_size,
)
from herdsim.policies.durations import format_duration

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
    """The key numbers per arm, in the order of the other figures, with 95% CIs when
    replicated; only the panels with something to show, the share of jobs succeeded
    always."""
    ranked = _succeeded_pct(c.summary)  # the arms in the timeline's order, top to bottom
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
        names = describe.short_labels(c.arms)
        axes[0].set_yticks(y, [names[label] for label in ranked["arm"]])
        axes[0].set_ylim(n - 0.5, -0.5)
        if c.replications > 1:
            what = (f"key numbers per arm; bars: mean of {c.replications} "
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

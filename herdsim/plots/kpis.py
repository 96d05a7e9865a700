"""``kpis``: the key numbers per arm, a panel each (95% CIs when replicated, the bounds of
a censored number as a range)."""

from __future__ import annotations

import textwrap

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.ticker import EngFormatter

from herdsim.analysis.kpis import KPI, format_kpi, on
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


def _kpi_panels(c: Comparison, ranked: pd.DataFrame) -> list[KPI]:
    """The KPIs with a figure panel and something to show: not one that needs an outage
    the scenario lacks, or a capacity that does not bind; not one shown when nonzero that
    is zero in every arm."""
    needs = {"outage": bool(c.scenario.all_outages),
             "capacity": describe.capacity(c.scenario) is not None}
    return [kpi for kpi in on("figure") if all(needs[need] for need in kpi.needs)
            and not (kpi.panels["figure"].nonzero
                     and not kpi.column(ranked).fillna(0).gt(0).any())]


def _values(kpi: KPI, ranked: pd.DataFrame) -> tuple[np.ndarray, pd.Series | None]:
    """*kpi*'s value per arm and their 95% half-widths (None: none), a fraction in
    percent."""
    scale = 100.0 if kpi.kind == "fraction" else 1.0
    ci = ranked.get(f"{kpi.key}_ci95")
    return (scale * kpi.column(ranked).to_numpy(dtype=float),
            None if ci is None else scale * ci)


def kpis(c: Comparison) -> Figure:
    """The key numbers per arm, in the order of the other figures, with 95% CIs when
    replicated; only the panels with something to show, the share of jobs succeeded
    always."""
    ranked = c.summary  # the arms in the timeline's order, top to bottom
    styles = arm_styles(c.arms)
    n = len(ranked)
    window = format_duration(c.scenario.peak_window)
    panels = _kpi_panels(c, ranked)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=wide_size(n, 0.6), layout="constrained")
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        y = np.arange(n)
        for ax, kpi in zip(axes, panels, strict=True):
            panel = kpi.panels["figure"]
            values, ci = _values(kpi, ranked)
            err = None if ci is None or pd.isna(ci).all() else ci.to_numpy(dtype=float)
            colors = [styles[label]["color"] for label in ranked["arm"]]
            ax.barh(y, np.nan_to_num(values), xerr=err, color=colors, alpha=0.8,
                    error_kw={"ecolor": "0.2", "capsize": 4})
            finite = values[np.isfinite(values)]
            span = finite.max() if finite.size and finite.max() > 0 else 1.0
            found = [kpi.bounds(c.context(row)) for _, row in ranked.iterrows()]
            span = max([span, *(b[1] for b in found if b is not None and b[1] is not None)])
            right_edge = span * 1.15  # where an unbounded range's arrow points
            missing = _missing(c, kpi)
            for i, (yi, value) in enumerate(zip(y, values, strict=True)):
                spread = 0.0 if err is None or not np.isfinite(err[i]) else err[i]
                text = _text(c, kpi, value, ranked.iloc[i], missing)
                bound = found[i]
                if bound is not None and bound[1] != bound[0]:  # the range it lies in
                    low, upper = bound
                    high = right_edge if upper is None else upper
                    ax.plot([low, high], [yi, yi], color="0.2", lw=2.5,
                            marker=">" if upper is None else "|", markevery=[1])
                    spread = max(spread, high - value)
                ax.text((value + spread if np.isfinite(value) else 0) + span * 0.03, yi,
                        text, va="center", fontsize=13,
                        weight="bold" if not np.isfinite(value) else "normal")
            if panel.reference is not None:
                ax.axvline(panel.reference, **CAPACITY_STYLE)
            right = span + (0 if err is None else float(np.nanmax(err, initial=0)))
            ax.set_xlim(0, right * 1.45)
            ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(4))
            if kpi.kind == "fraction":
                ax.set_xticks([0, 50, 100])
            if not finite.size:
                ax.set_xticks([])  # nothing to measure: no scale
            if span >= 1e4:
                ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_title(textwrap.fill(panel.heading.format(window=window),
                                       _chars(len(panels), 15)))
            ax.set_xlabel(textwrap.fill(panel.axis.format(window=window),
                                        _chars(len(panels), 12)), fontsize=12)
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


def _missing(c: Comparison, kpi: KPI) -> str:
    """What a bar of *kpi* with no value says: ``not recovered`` over ``within the run``
    for an unreached one after an outage, else its missing text."""
    if kpi.unreached and kpi.applies(c.context()):
        return f"{kpi.unreached}\nwithin the run"
    return c.missing(kpi.key)


def _text(c: Comparison, kpi: KPI, value: float, row: pd.Series, missing: str) -> str:
    """The label beside a bar: *missing* when undefined, a fraction's percentage to three
    digits, else as the tables show it."""
    if not np.isfinite(value):
        return missing
    if kpi.kind == "fraction":
        return format_kpi(value) + "%"
    return kpi.show(value, c.context(row))


def _chars(panels: int, size: float) -> int:
    """Characters of a *size*-point text that fit one of *panels* side by side on a 16-inch
    figure (a character is about 0.6 em wide; a fifth of each panel left for its margins),
    never more than 24."""
    return max(10, min(24, int(WIDE[0] / panels * 0.8 * 72 / (0.6 * size))))

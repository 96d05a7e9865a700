"""Figures of ``herdsim reproduce``: two panels per experiment, drawn from its tables.

Each function takes the frames :mod:`herdsim.experiments.reproduce` builds (columns named
in its docstrings) and returns a :class:`~matplotlib.figure.Figure`.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
import pandas as pd

from herdsim.plots.style import OTHER_COLORS, STYLE, Figure, strategy_color

ARM_COLORS = ("#D55E00", "#0072B2", "#999933", "#CC79A7", "#56B4E9", "#009E73")
ARM_MARKERS = ("o", "^", "s", "D", "v", "P")


def aws_2015(table: pd.DataFrame) -> Figure:
    """Calls and completion time against contending clients, a line per strategy
    (``table``: clients, strategy, calls, completion_time)."""
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        calls, time = fig.subplots(1, 2)
        for strategy, rows in table.groupby("strategy", observed=True):
            style = {"color": strategy_color(str(strategy)), "lw": 2, "marker": "o", "ms": 4}
            calls.plot(rows["clients"], rows["calls"], label=strategy, **style)
            time.plot(rows["clients"], rows["completion_time"], label=strategy, **style)
        calls.set(title="Work: writes the row receives", xlabel="contending clients",
                  ylabel="calls (mean per run)")
        time.set(title="Time until the last client is done", xlabel="contending clients",
                 ylabel="seconds (mean per run)")
        calls.legend()
        fig.suptitle("Optimistic concurrency, one row (AWS Architecture Blog, 2015)")
    return fig


def collapse(table: pd.DataFrame, series: pd.DataFrame, arms: Sequence[str],
             variations: Sequence[str], shown: Sequence[tuple[float, str]],
             spike: tuple[float, float], recovered: float, window: float,
             title: str) -> Figure:
    """Left: goodput over time in the first run of each (rate, arm) in *shown* (``series``:
    time, success per second, rate, arm). Right: the fraction of runs that recovered per
    rate with its 95% Wilson interval, a line per arm (``table``: rate, arm, recovered,
    runs, recovered_low, recovered_high); arms in *variations* (herdsim's, not the
    original's) dashed. *spike* = (start, end) of the spike, shaded; a run recovered when
    its goodput over the last *window* seconds reached *recovered* x the rate."""
    colors = {arm: ARM_COLORS[i % len(ARM_COLORS)] for i, arm in enumerate(arms)}
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        timeline, boundary = fig.subplots(1, 2)
        for (rate, arm), ls in zip(shown, ("-", "--", ":", "-."), strict=False):
            rows = series[(series["rate"] == rate) & (series["arm"] == arm)]
            if len(rows):
                smooth = rows["success"].rolling(5, min_periods=1).mean()
                timeline.plot(rows["time"], smooth, ls=ls, lw=2, color=colors[arm],
                              label=f"{rate:g}/s, {arm}")
        timeline.axvspan(*spike, color="0.55", alpha=0.3, lw=0)
        timeline.set(title="Goodput, first run, 5 s mean (grey: the spike)",
                     xlabel="time (s)", ylabel="successes per second")
        if timeline.lines:
            timeline.legend(fontsize=11)
        lifts = np.linspace(-0.02, 0.02, max(2, len(arms)))  # lifted apart: curves coincide
        for i, arm in enumerate(arms):
            rows = table[table["arm"] == arm]
            if not len(rows):
                continue
            y = rows["recovered"] / rows["runs"]
            err = np.clip(np.vstack([y - rows["recovered_low"], rows["recovered_high"] - y]),
                          0.0, None)  # rounding: Wilson's bounds at 0 of n or n of n
            boundary.errorbar(rows["rate"], y + lifts[i], yerr=err, color=colors[arm],
                              marker=ARM_MARKERS[i % len(ARM_MARKERS)], lw=2, capsize=3,
                              ls="--" if arm in variations else "-",
                              label=arm + (" (herdsim variation)" if arm in variations else ""))
        boundary.set(title="Runs that recovered, with 95% Wilson intervals",
                     xlabel="base rate λ (requests/s)",
                     ylabel=f"goodput ≥ {recovered:g} λ over the last {window:g} s",
                     ylim=(-0.08, 1.08))
        boundary.legend(fontsize=10)
        fig.suptitle(title)
    return fig


def retries(table: pd.DataFrame, arms: Sequence[str], title: str) -> Figure:
    """Success and calls per request against the failure probability, a series per arm
    with 95% intervals, and the steady-state expectation as a line where there is one
    (``table``: arm, error_rate, success, success_ci, calls_per_job, calls_ci,
    theory_success, theory_calls_per_job)."""
    colors = {arm: (ARM_COLORS + OTHER_COLORS)[i] for i, arm in enumerate(arms)}
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        success, load = fig.subplots(1, 2)
        for arm, rows in table.groupby("arm", sort=False):
            color = colors.get(str(arm), "black")
            for ax, column, ci in ((success, "success", "success_ci"),
                                   (load, "calls_per_job", "calls_ci")):
                ax.errorbar(rows["error_rate"], rows[column], yerr=rows[ci].fillna(0),
                            marker="o", ms=5, lw=0, elinewidth=1.5, color=color,
                            label=str(arm))
                if rows[f"theory_{column}"].notna().any():
                    ax.plot(rows["error_rate"], rows[f"theory_{column}"], lw=1.5,
                            color=color, alpha=0.6)
        success.plot([], [], color="black", lw=1.5, alpha=0.6, label="steady state (lines)")
        success.set(title="Requests that succeed", xlabel="failure probability of a call p",
                    ylabel="fraction of requests")
        load.set(title="Load on the downstream", xlabel="failure probability of a call p",
                 ylabel="calls per request")
        success.legend(fontsize=10, loc="lower left")
        fig.suptitle(title)
    return fig


def cache(table: pd.DataFrame, series: pd.DataFrame, curves: dict[int, list],
          flush: float, title: str) -> Figure:
    """Left: the hit rate per bin, herdsim's mean over its runs (solid) and the original's
    mean over its seeds (dashed, *curves*: capacity -> [bin end, hit rate] pairs), a
    colour per backend capacity (``series``: time (bin end), hit_rate, capacity, run).
    Right: seconds to refill per capacity, herdsim's mean with its 95% CI beside the
    original's mean (``table``: capacity, refill_time, refill_ci, original_refill_time)."""
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        left, right = fig.subplots(1, 2)
        for i, capacity in enumerate(table["capacity"]):
            color = ARM_COLORS[i % len(ARM_COLORS)]
            rows = series[series["capacity"] == capacity]
            mean = rows.groupby("time")["hit_rate"].mean()
            left.plot(mean.index, mean.to_numpy(), color=color, lw=2,
                      label=f"{capacity:g}/s herdsim")
            if capacity in curves:
                ends, rates = np.array(curves[capacity]).T
                left.plot(ends, rates, color=color, lw=1.6, ls="--",
                          label=f"{capacity:g}/s original")
        left.axvline(flush, color="0.4", lw=1, ls=":")
        left.set(title="Hit rate per 1 s bin, mean over runs (dotted: the flush)",
                 xlabel="time (s)", ylabel="hits / requests", ylim=(0, 1))
        left.legend(fontsize=10, ncol=2, loc="lower right")
        x = np.arange(len(table))
        right.bar(x - 0.2, table["refill_time"], 0.4, yerr=table["refill_ci"],
                  color=OTHER_COLORS[0], capsize=4, label="herdsim (95% CI)")
        right.bar(x + 0.2, table["original_refill_time"], 0.4, color=OTHER_COLORS[1],
                  label="original")
        right.set_xticks(x, [f"{c:g}/s" for c in table["capacity"]])
        right.set(title="Seconds from the flush to 90% of the pre-flush hit rate",
                  xlabel="backend capacity (calls/s let through)", ylabel="seconds (mean)")
        right.legend()
        fig.suptitle(title)
    return fig

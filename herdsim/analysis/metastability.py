"""Recovered, degraded or metastable? The class of each run and cell of a sweep, and the map.

The rule (also in ``docs/scaling.md``) uses the summary KPIs (``recovery_time``,
``collapses_after_outage``, ``capacity_rate``) and two read off the run here:

- ``load``: offered rate / capacity, rho; ``outage_seconds``: total outage time, d;
- ``goodput_tail``: successes per second over the last 10% of the run (after the last
  outage), over the offered rate of good jobs.

A smooth queue that loses d seconds of service at load rho works off the backlog in
``ideal_drain = d * rho / (1 - rho)`` seconds after the outage (infinite when rho >= 1).

- **recovered**: ``recovery_time`` is defined and at most
  ``max(SLOW_FLOOR, SLOW_FACTOR * ideal_drain)``, and the tail goodput is at least
  ``GOODPUT_FLOOR`` (back to where it was before the outage is not recovered when that was
  serving under half the offered jobs, e.g. a limiter refusing most calls from the start);
- **metastable**: ``recovery_time`` is undefined (not healthy when the run ends) and the
  trigger's end did not help: the downstream collapsed again after the outage
  (``collapses_after_outage > 0``) or the tail goodput is below ``GOODPUT_FLOOR``;
- **degraded**: the rest: recovered, but slowly or serving under ``GOODPUT_FLOOR``; or
  not yet recovered when the run ends
  while serving at least ``GOODPUT_FLOOR`` of the offered jobs with no new collapse
  (still working through its backlog).

A cell (its replications) takes the class of most of its runs, ties going to the worse
class (:func:`majority`); its label is the median ``recovery_time`` of its runs that
recovered. A run must last long enough after the outage for "not yet recovered" to mean
something: an undefined ``recovery_time`` after an outage means *not recovered within the
run* (:func:`recovery_or_inf`), never "fast".

This module owns the vocabulary every surface asks (the CLI, the figures, the report and
the sweep): the classes, the majority of replications, how arms are ranked (:func:`rank`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from herdsim.policies.arrivals.piecewise import Piecewise

CLASSES = ("recovered", "degraded", "metastable")  # from best to worst
SLOW_FACTOR = 2.0  # recovery slower than twice the ideal drain time is degraded
SLOW_FLOOR = 5.0  # s: a recovery within this is never called slow
GOODPUT_FLOOR = 0.5  # tail goodput below half the offered jobs counts as down
TAIL_FRACTION = 0.1  # the tail is the last 10% of the run
NOT_RECOVERED = "not recovered within the run"  # a recovery_time undefined after an outage
RANK_RULE = ("ranked by state (recovered, degraded, metastable), then recovery time "
             "(not recovered last), then goodput, then peak")


def recovery_or_inf(value, outages: int) -> float:
    """A ``recovery_time`` to compare: its value, +inf when undefined after an outage (not
    recovered within the run), NaN when there was no outage to recover from."""
    if value is None or pd.isna(value):
        return math.inf if outages else math.nan
    return float(value)


def majority(states) -> str:
    """The class of most of *states* (one per replication), ties going to the worse."""
    counts = pd.Series(list(states)).value_counts()
    worst_first = [c for c in reversed(CLASSES) if c in counts.index]
    return max(worst_first or list(counts.index), key=lambda c: counts[c])


def state_text(states) -> str:
    """``recovered``, or ``degraded (2 of 3 runs; 1 recovered)`` when replications
    disagree (the :func:`majority` first)."""
    values = list(states)
    if not values:
        return "n/a"
    counts = pd.Series(values).value_counts()
    top = majority(values)
    if counts[top] == len(values):
        return top
    rest = ", ".join(f"{counts[s]} {s}" for s in counts.index if s != top)
    return f"{top} ({counts[top]} of {len(values)} runs; {rest})"


def run_kpis(result) -> dict[str, float | None]:
    """``load``, ``outage_seconds`` and ``goodput_tail`` of one run (see the module doc)."""
    return frame_kpis(result.timeseries, result.scenario)


def tail(ts: pd.DataFrame, sc) -> np.ndarray:
    """The tail's bins: the last ``TAIL_FRACTION`` of the run, after the last outage."""
    return ts["time"].to_numpy() >= max(sc.last_outage_end or 0.0,
                                        sc.duration * (1 - TAIL_FRACTION))


def frame_kpis(ts: pd.DataFrame, sc) -> dict[str, float | None]:
    """:func:`run_kpis` from a run's time series and scenario."""
    tail_bins = tail(ts, sc)
    seconds = tail_bins.sum() * sc.bin
    offered = sc.workload.rate * (1 - sc.workload.poison_fraction)
    if sc.workload.profile and seconds > 0:  # the rate the profile offers in the tail
        start = sc.duration - seconds
        offered = (Piecewise(sc.workload).integral(start, sc.duration) / seconds
                   * (1 - sc.workload.poison_fraction))
    goodput = float(ts["success"].to_numpy()[tail_bins].sum() / seconds / offered) \
        if seconds > 0 and offered > 0 else None
    return {
        "load": sc.workload.rate / sc.downstream.capacity_rate(),
        "outage_seconds": float(sum(o.duration for o in sc.all_outages)),
        "goodput_tail": goodput,
    }


def ideal_drain(load: float, outage_seconds: float) -> float:
    """Seconds a smooth queue at *load* needs to work off *outage_seconds* of backlog."""
    if outage_seconds == 0:
        return 0.0
    return math.inf if load >= 1 else outage_seconds * load / (1 - load)


def slow_limits(runs: pd.DataFrame) -> np.ndarray:
    """The longest recovery each run (row) of a sweep table may take and still be
    recovered: ``max(SLOW_FLOOR, SLOW_FACTOR * ideal_drain)`` (inf at a load of 1 or more)."""
    drain = np.array([ideal_drain(rho, d) for rho, d in
                      zip(runs["load"], runs["outage_seconds"], strict=True)], dtype=float)
    return np.maximum(SLOW_FLOOR, SLOW_FACTOR * drain)


def classify(runs: pd.DataFrame) -> pd.Series:
    """The class of every run (row) of a sweep table, by the rule of the module doc."""
    recovery = pd.to_numeric(runs["recovery_time"], errors="coerce").to_numpy(dtype=float)
    slow_limit = slow_limits(runs)
    goodput = pd.to_numeric(runs["goodput_tail"], errors="coerce").to_numpy(dtype=float)
    stuck = (runs["collapses_after_outage"].to_numpy() > 0) | ~(goodput >= GOODPUT_FLOOR)
    never = np.isnan(recovery)
    serving = ~(goodput < GOODPUT_FLOOR)  # (unknown counts as serving)
    classes = np.where(~never & (recovery <= slow_limit) & serving, "recovered",
                       np.where(never & stuck, "metastable", "degraded"))
    return pd.Series(classes, index=runs.index, name="class")


def class_counts(runs: pd.DataFrame, axes: list[str], strategies: list[str]) -> pd.DataFrame:
    """Cells of each class (columns, best first) under each of *strategies* (rows)."""
    table = cells(runs, axes)
    counts = pd.crosstab(table["strategy"], table["class"])
    return counts.reindex(index=strategies, columns=list(CLASSES), fill_value=0)


def cells(runs: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """One row per strategy and cell: ``class``, ``runs``, ``agree`` (runs of that class)
    and ``recovery_time`` (median over the runs that recovered; NaN if none did)."""
    frame = runs.assign(**{"class": classify(runs)})
    rows = []
    for key, group in frame.groupby(["strategy", *axes], sort=False, dropna=False):
        counts = group["class"].value_counts()
        winner = majority(group["class"])
        recovery = pd.to_numeric(group["recovery_time"], errors="coerce").median()
        rows.append({**dict(zip(["strategy", *axes], key, strict=True)), "class": winner,
                     "runs": len(group), "agree": int(counts[winner]), "recovery_time": recovery})
    return pd.DataFrame(rows)

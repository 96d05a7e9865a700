"""What a reviewer reads first: one line per arm, then the assumptions it depends on.

Every number comes from the runs' summaries (the KPI registry's keys) and is shown as the
tables show it (:func:`~herdsim.analysis.kpis.show`); states, their majority over
replications and the order of the arms come from :mod:`herdsim.analysis.metastability`.
With two or more replications, arms whose 95% intervals overlap are called ties.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from herdsim.analysis import loops, metastability
from herdsim.analysis.kpis import BY_KEY, kpi_of, number_text, on, show
from herdsim.analysis.kpis.predicted import near_text
from herdsim.analysis.metastability import NOT_RECOVERED, state_text
from herdsim.analysis.statistics import ci95
from herdsim.config import graph
from herdsim.model.downstream import family
from herdsim.plots import describe
from herdsim.policies.durations import format_duration

__all__ = ["NOT_RECOVERED", "Stat", "arm_stats", "assumptions", "state_text", "states", "ties",
           "verdict"]


@dataclass
class Stat:
    """A KPI of one arm over its replications: mean, 95% half-width (NaN below 2 runs)."""

    mean: float
    ci: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - (0.0 if np.isnan(self.ci) else self.ci)

    @property
    def high(self) -> float:
        return self.mean + (0.0 if np.isnan(self.ci) else self.ci)

    def text(self, fmt=number_text, missing: str = "n/a") -> str:
        if np.isnan(self.mean):
            return missing
        spread = "" if np.isnan(self.ci) else f" ±{fmt(self.ci)}"
        return fmt(self.mean) + spread


def derived(runs: pd.DataFrame, key: str) -> np.ndarray:
    """A KPI per run; computed by the KPI's ``legacy`` rule (``succeeded_fraction``:
    succeeded / submitted) for directories saved before it was a KPI."""
    column = kpi_of(key).column(runs)
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)


def stat(values: np.ndarray) -> Stat:
    finite = values[~np.isnan(values)]
    mean = float(finite.mean()) if finite.size == len(values) and finite.size else np.nan
    spread = ci95(finite) if finite.size == len(values) > 1 else np.nan
    return Stat(mean, spread, len(values))


def states(c) -> dict[str, list[str]]:
    """``arm -> [state of each replication]``: the run's ``state`` KPI, else the sweep's
    classifier (recovered | degraded | metastable) on the saved time series."""
    out: dict[str, list[str]] = {}
    for arm in c.arms:
        runs = c.runs[c.runs["arm"] == arm.label].sort_values("replication")
        if "state" in runs and runs["state"].notna().all():
            out[arm.label] = runs["state"].astype(str).tolist()
            continue
        rows = []
        for _, run in runs.iterrows():
            ts = c.timeseries[(c.timeseries["arm"] == arm.label)
                              & (c.timeseries["replication"] == run["replication"])]
            extra = metastability.run_kpis(SimpleNamespace(scenario=arm.scenario, timeseries=ts))
            rows.append({**run.to_dict(), **extra})
        out[arm.label] = metastability.classify(pd.DataFrame(rows)).tolist() if rows else []
    return out


def arm_stats(c, key: str) -> dict[str, Stat]:
    return {arm.label: stat(derived(c.runs[c.runs["arm"] == arm.label], key))
            for arm in c.arms}


def ties(stats: dict[str, Stat], better: str) -> list[str]:
    """The arms tied with the best on this KPI: intervals overlapping the best one's (with
    one replication only the best itself)."""
    known = {k: s for k, s in stats.items() if not np.isnan(s.mean)}
    if not known:
        return []
    pick = min if better == "lower" else max
    best = known[pick(known, key=lambda k: known[k].mean)]
    if np.isnan(best.ci):
        return [k for k, s in known.items() if s.mean == best.mean]
    return [k for k, s in known.items() if s.low <= best.high and best.low <= s.high]


def _names(labels: list[str]) -> str:
    if len(labels) <= 2:
        return " and ".join(labels)
    return ", ".join(labels[:-1]) + " and " + labels[-1]


def arm_line(c, row: pd.Series, states_of: list[str]) -> str:
    """``exponential: metastable; 26.3% of jobs succeeded; recovery: not recovered within
    the run; 3 crashes after the outage; peak 28.8× capacity (busiest 10ms)``; a call
    graph's names its headline tier: ``metastable (db, the worst of 3 tiers)``, ``9
    crashes of db after the outage``, ``peak 13.4× db capacity``."""
    context = c.context(row)
    tier = row.get("headline_tier")
    tier = None if pd.isna(tier) else str(tier)  # a call graph's worst tier, else None
    at = f" ({tier}, the worst of {len(_tiers(c))} tiers)" if tier else ""
    parts = [f"{row['arm']}: {state_text(states_of)}{at}",
             f"{show('succeeded_fraction', row.get('succeeded_fraction'), context)} of jobs "
             "succeeded"]
    if c.scenario.all_outages:
        recovery = c.shown("recovery_time", row)
        parts.append((f"recovery {recovery} s" if recovery[:1].isdigit() else recovery)
                     + (f" ({tier})" if tier else ""))
        crashes = row.get("collapses_after_outage")
        crashing = _tiers(c)[tier] if tier else c.scenario.downstream
        if crashing.overload.collapse is not None and not pd.isna(crashes):
            parts.append(f"{show('collapses_after_outage', crashes, context)} crash"
                         f"{'es' * (crashes != 1)}{f' of {tier}' if tier else ''} after the "
                         "outage")
    window = format_duration(c.scenario.peak_window)
    if not pd.isna(row.get("peak_to_capacity", np.nan)):
        parts.append(f"peak {show('peak_to_capacity', row['peak_to_capacity'], context)}× "
                     f"{f'{tier} capacity' if tier else 'capacity'} (busiest {window})")
    elif not pd.isna(row.get("peak_attempt_rate", np.nan)):
        parts.append(f"busiest {window}: {show('peak_calls', row.get('peak_calls'), context)}"
                     " calls")
    held = row.get("sustained_by")
    if isinstance(held, str):  # a degraded or metastable run: the loops of its tail
        parts.append(held_text(held, row, context, tier))
    return "; ".join(parts)


def _figure(row: pd.Series, key: str, context) -> str | None:
    value = row.get(key)
    return None if value is None or pd.isna(value) else show(key, value, context)


def held_text(held: str, row: pd.Series, context, tier: str | None = None) -> str:
    """``held down by workload amplification + crash-restart cycles over the run's tail
    (2 calls per open job, above 1.5; down 75% of it)``: the loops named and the
    figures that named them, against their thresholds (docs/mitigations.md); a call
    graph's are its headline *tier*'s (``... at db over the run's tail``)."""
    figures = []
    for key, words in (("tail_calls_per_job", "{} calls per job"),
                       ("tail_calls_per_open_job", "{} calls per open job")):
        value = _figure(row, key, context)
        if value is not None and loops.AMPLIFIED in held:
            figures.append(words.format(value) + f", above {loops.AMPLIFICATION:g}")
    ratio = _figure(row, "tail_capacity_ratio", context)
    if ratio is not None and loops.DEGRADED in held and "(cold cache)" not in held:
        figures.append(f"served {ratio}× the healthy rate per busy slot, below "
                       f"{loops.DEGRADATION:g}")
    now, then = (_figure(row, key, context) for key in ("tail_hit_rate", "hit_rate_before"))
    if now is not None and then is not None and loops.COLD in held:
        figures.append(f"cache hit rate {now} against {then} before the trigger, below "
                       f"{loops.DEGRADATION:g}×")
    down = _figure(row, "tail_down_fraction", context)
    if down is not None and loops.CRASHING in held:
        figures.append(f"down {down} of it")
    at = f" at {tier}" if tier else ""
    return f"held down by {held}{at} over the run's tail" + (f" ({'; '.join(figures)})"
                                                              if figures else "")


def _tiers(c) -> dict:
    """The comparison's tiers by name, the workers' downstream first."""
    return graph.tiers(c.scenario.downstream, c.scenario.services)


def _crash_rules(sc) -> list[str]:
    """The crash rule of every tier that has one (the top one is ``downstream``), or the
    sentence that none can crash."""
    tiers = ({"downstream": sc.downstream} if not sc.services
             else dict(zip(["downstream", *sc.services],
                           [sc.downstream, *sc.services.values()], strict=True)))
    out = []
    for path, tier in tiers.items():
        collapse = tier.overload.collapse
        if collapse is None:
            continue
        rule = []
        if collapse.threshold is not None:
            rule.append(f"{collapse.threshold:,} calls land within "
                        f"{format_duration(collapse.window)}")
        if collapse.load_limit is not None:
            rule.append(f"{collapse.load_limit:,} calls are in flight or waiting")
        name = path if path != "downstream" else tier.name or "the downstream"
        field = path if path == "downstream" else f"services.{path}"
        out.append(f"The crash rule: {name} crashes for "
                   f"{format_duration(collapse.restart_time)} when "
                   + " or ".join(rule) + ". States after the outage depend on it most: "
                   f"test it with --set {field}.overload.collapse=null (no crash), "
                   "or with your own system's threshold.")
    if not out:
        out.append("No crash rule: an overloaded downstream slows or rejects but is never "
                   "knocked over (overload.collapse), so no arm can relapse.")
    return out


def assumptions(c) -> list[str]:
    """What the verdict depends on: the crash rule above all, the capacity, the callers,
    the replications. Each names the field to change to test it."""
    sc = c.scenario
    d = sc.downstream
    out = []
    if family.of(sc).queueing:
        out += _crash_rules(sc)
        capacity = describe.capacity(sc)
        if capacity is None:
            out.append("Capacity: " + describe.UNBOUNDED_TEXT + ".")
        else:
            whose = ("the top tier's, from" if sc.services
                     else "the summary's capacity_rate, from")
            out.append(f"Capacity: {capacity:,.0f} calls/s ({whose} "
                       "downstream.concurrency and its service time); peaks are measured "
                       f"over {format_duration(sc.peak_window)} (peak_window).")
        if sc.services:  # a call graph: the run-level capacity is the top tier's
            each = ", ".join(f"{name} {tier.capacity_rate():,.0f}" for name, tier
                             in graph.tiers(d, sc.services).items())
            out.append(f"Call graph: the capacity above is the top tier's; each tier's own, "
                       f"in calls/s without its calls: {each} (the per-tier table). An "
                       "arm's state, recovery, crashes and peak are its headline tier's: "
                       "the worst state, then the most collapses, then the highest peak "
                       "over capacity.")
        callers = (f"{sc.workers.count:,} workers (workers.count)" if sc.workers.count
                   is not None else "open loop: one caller per job (workers.count: null)")
        timeout = (f"client timeout {format_duration(d.timeout)}"
                   if getattr(d, "timeout", None) is not None else "no client timeout")
        out.append(f"Callers: {callers}; {timeout}; retries "
                   + ("unlimited" if sc.retry.max_retries is None
                      else f"at most {sc.retry.max_retries}") + ".")
    if c.replications == 1 and len(c.arms) > 1:
        out.append("One replication per arm: single runs, so no difference between arms is "
                   "tested; rerun with --replications 5 for 95% confidence intervals and ties.")
    return out


def verdict(c) -> list[str]:
    """The verdict: a lead line, then one line per arm (best first, the ranking of
    :func:`~herdsim.analysis.kpis.rank`)."""
    sc = c.scenario
    st = states(c)
    if sc.all_outages:
        end = format_duration(sc.last_outage_end)
        lead = (f"After the outage ended at {end} (the run lasts "
                f"{format_duration(sc.duration)}), best first:")
    else:
        lead = "No outage in this scenario, so no recovery is measured; best first:"
    if c.predicted:
        lead = f"Predicted by the {c.predicted}, not simulated. {lead}"
    lines = [lead]
    for _, row in c.ranked().iterrows():
        lines.append(arm_line(c, row, st[row["arm"]]))
        run = c.runs[c.runs["arm"] == row["arm"]].iloc[0]
        near = near_text(run.get("state"), run.get("near_threshold")) if c.predicted \
            else None
        if near:  # the state the model does not claim, and why
            lines.append(f"{near[0].upper()}{near[1:]}; simulate it (herdsim compare "
                         "--replications 5) to see which side it falls.")
    mechanisms = {arm.label: _mechanisms(c, arm) for arm in c.arms}
    if any(mechanisms.values()):
        lines.append("What held the load back: " + "; ".join(
            f"{a}: {', '.join(m) if m else 'nothing'}" for a, m in mechanisms.items()) + ".")
    if len(c.arms) > 1 and c.replications > 1:
        share = arm_stats(c, "succeeded_fraction")
        best = ties(share, BY_KEY["succeeded_fraction"].better or "higher")
        tied = f"{_names(best)} tie" if len(best) > 1 else f"{best[0]} leads"
        lines.append(f"On jobs succeeded, {tied} (95% intervals overlap when tied).")
    return lines


def _mechanisms(c, arm) -> list[str]:
    """What held an arm's load back, by mechanism (the KPIs with a verdict panel: its
    sentence), as mean counts per run."""
    ds = arm.scenario.downstream
    kind = ds.admission.kind if getattr(ds, "admission", None) is not None else ""
    found = []
    if ds.room().always is not False:  # a room that may serve the newest call
        found.append(f"the waiting room served newest first ({ds.discipline})")
    runs = c.runs[c.runs["arm"] == arm.label]
    for kpi in on("verdict"):
        n = stat(derived(runs, kpi.key)).mean
        if not np.isnan(n) and n > 0:
            found.append(kpi.panels["verdict"].heading.format(kind=kind, n=f"{n:,.0f}"))
    return found

"""What a reviewer reads first: per-arm numbers over replications, ties, and the verdict.

Every number comes from the runs' summaries (the KPI registry's keys). With one replication
nothing is ranked as a contest and no interval is shown; with two or more, arms whose 95%
intervals overlap are called ties.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from herdsim.analysis import metastability
from herdsim.analysis.kpis import NOT_RECOVERED, number_text
from herdsim.analysis.statistics import ci95
from herdsim.config.durations import format_duration
from herdsim.plots import describe

__all__ = ["NOT_RECOVERED", "Stat", "arm_stats", "state_text", "states", "ties", "verdict"]


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


def _column(runs: pd.DataFrame, key: str) -> np.ndarray:
    if key not in runs:
        return np.full(len(runs), np.nan)
    return pd.to_numeric(runs[key], errors="coerce").to_numpy(dtype=float)


def derived(runs: pd.DataFrame, key: str) -> np.ndarray:
    """A KPI per run; ``succeeded_fraction`` computed (succeeded / submitted) for
    directories saved before it was a KPI."""
    if key == "succeeded_fraction" and key not in runs:
        succeeded, submitted = _column(runs, "jobs_succeeded"), _column(runs, "jobs_submitted")
        return np.divide(succeeded, submitted, out=np.full(len(runs), np.nan),
                         where=submitted > 0)
    return _column(runs, key)


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


def state_text(values: list[str]) -> str:
    """``recovered``, or ``degraded (2 of 3 runs; 1 recovered)`` when runs disagree."""
    if not values:
        return "n/a"
    counts = pd.Series(values).value_counts()
    worst_first = [s for s in reversed(metastability.CLASSES) if s in counts.index]
    top = max(worst_first or list(counts.index), key=lambda s: counts[s])
    if counts[top] == len(values):
        return top
    rest = ", ".join(f"{counts[s]} {s}" for s in counts.index if s != top)
    return f"{top} ({counts[top]} of {len(values)} runs; {rest})"


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


def _percent(value: float) -> str:
    return f"{value:.0%}" if value < 0.995 or value == 1 else f"{value:.1%}"


def verdict(c) -> list[str]:
    """The verdict paragraph, one sentence per item, computed from the KPIs."""
    sc = c.scenario
    reps = c.replications
    st = states(c)
    recovery = arm_stats(c, "recovery_time")
    sentences = []
    recovered = [a for a, s in st.items() if state_text(s) == "recovered"]
    not_yet = [a for a in st if np.isnan(recovery[a].mean)]
    if sc.downstream.outages:
        end = format_duration(max(e for _, e in sc.outage_windows))
        if recovered:
            fast = sorted(recovered, key=lambda a: recovery[a].mean)
            times = "; ".join(f"{a} in {recovery[a].text()} s" for a in fast)
            sentences.append(f"Recovered after the outage ended at {end}: {times}.")
        else:
            sentences.append(f"No arm recovered cleanly after the outage ended at {end}.")
        others = [a for a in st if a not in recovered]
        if others:
            parts = [f"{a} {state_text(st[a])}" + (f" ({NOT_RECOVERED}, "
                                                   f"{format_duration(sc.duration)})"
                                                   if a in not_yet else "")
                     for a in others]
            sentences.append("Not a clean recovery: " + "; ".join(parts) + ".")
    else:
        sentences.append("No outage in this scenario, so no recovery is measured; state: "
                         + "; ".join(f"{a} {state_text(s)}" for a, s in st.items()) + ".")
    peak = arm_stats(c, "peak_to_capacity")
    window = format_duration(sc.peak_window)
    if describe.capacity(sc) is not None and sc.downstream.model != "occ":
        order = sorted(peak, key=lambda a: -np.nan_to_num(peak[a].mean))
        rise = ", ".join(f"{peak[a].text()}× under {a}" for a in order)
        sentence = f"How high the herd rose: the busiest {window} reached {rise} capacity"
        baseline = arm_stats(c, "peak_to_baseline")
        if any(not np.isnan(s.mean) for s in baseline.values()):
            sentence += ("; against the busiest pre-outage " + window + ": "
                         + ", ".join(f"{baseline[a].text()}× ({a})" for a in order))
        sentences.append(sentence + ".")
    else:
        rate = arm_stats(c, "peak_attempt_rate")
        order = sorted(rate, key=lambda a: -np.nan_to_num(rate[a].mean))
        sentences.append(f"Busiest {window}: " + ", ".join(
            f"{rate[a].text()} calls/s ({a})" for a in order) + " (no capacity to compare)"
            + ".")
    share = arm_stats(c, "succeeded_fraction")
    cost = arm_stats(c, "amplification")
    goodput = arm_stats(c, "goodput")
    after = "after the outage" if sc.downstream.outages else "over the run"

    def paid(a: str) -> str:
        text = (f"{a} {share[a].text(_percent)} of jobs succeeded at "
                f"{cost[a].text(missing='no')} downstream calls per succeeded job")
        if not np.isnan(goodput[a].mean):
            text += f", goodput {goodput[a].text()}× the offered rate {after}"
        return text

    order = sorted(share, key=lambda a: -np.nan_to_num(share[a].mean))
    sentences.append("What it cost: " + "; ".join(paid(a) for a in order) + ".")
    mechanisms = {arm.label: _mechanisms(c, arm) for arm in c.arms}
    if any(mechanisms.values()):
        sentences.append("What held the load back: " + "; ".join(
            f"{a}: {', '.join(m) if m else 'nothing'}" for a, m in mechanisms.items()) + ".")
    if len(c.arms) > 1:
        best = ties(share, "higher")
        if reps > 1:
            tied = f"{_names(best)} tie" if len(best) > 1 else f"{best[0]} leads"
            sentences.append(f"On jobs succeeded, {tied} (95% intervals overlap when "
                             "tied).")
        else:
            sentences.append(
                "One replication per arm: these are single runs, so no difference between "
                "arms is tested and nothing here is a ranking; rerun with --replications 5 "
                "for 95% confidence intervals and ties.")
    return sentences


MECHANISMS = (  # summary key -> what did the work, for the verdict
    ("shed_admission_total", "the admission limit ({kind}) refused {n} calls"),
    ("shed_codel_total", "CoDel rejected {n} waiting calls"),
    ("shed_shedding_total", "probabilistic shedding refused {n} calls"),
    ("budget_refused_total", "the retry budget refused {n} retries"),
    ("calls_avoided", "the circuit breaker short-circuited {n} calls"),
)


def _mechanisms(c, arm) -> list[str]:
    """What held an arm's load back, by mechanism, as mean counts per run."""
    ds = arm.scenario.downstream
    kind = ds.admission.kind if getattr(ds, "admission", None) is not None else ""
    found = []
    if getattr(ds, "discipline", "fifo") != "fifo":
        found.append(f"the waiting room served newest first ({ds.discipline})")
    runs = c.runs[c.runs["arm"] == arm.label]
    for key, text in MECHANISMS:
        n = stat(derived(runs, key)).mean
        if not np.isnan(n) and n > 0:
            found.append(text.format(kind=kind, n=f"{n:,.0f}"))
    return found

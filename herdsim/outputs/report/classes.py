"""The report's criticality classes (``workload.criticality``): per arm, a row per class
(jobs, succeeded share, dead letters, the p99 of successes: the mean over
replications), highest class first; nothing for a run without classes."""

from __future__ import annotations

import pandas as pd

from herdsim.analysis.kpis import number_text
from herdsim.policies.criticality import CLASSES

NOTE = ("Each criticality class of the jobs (summary.json's <code>classes</code>), highest "
        "first: its jobs, the share that succeeded, those dead-lettered and the p99 "
        "latency of its successes (from arrival to success), the mean over replications. "
        "Under overload the waiting room, shedding, the admission limit and CoDel drop "
        "the lowest class first (docs/policies.md, Priority classes).")


def rows(c) -> list[dict]:
    """Per arm of comparison *c* and class present: its numbers, as text."""
    present = [name for name in CLASSES if f"classes.{name}.jobs" in c.runs.columns]
    out = []
    for arm, runs in c.runs.groupby("arm", sort=False):
        for name in present:
            col = f"classes.{name}.{{}}".format
            if runs[col("jobs")].isna().all():
                continue  # an arm without this class (or without classes)
            share = runs[col("succeeded_fraction")].mean()
            p99 = runs[col("latency_p99")].mean()
            out.append({"arm": arm, "class": name,
                        "jobs": number_text(float(runs[col("jobs")].mean())),
                        "succeeded %": "n/a" if pd.isna(share) else f"{100 * share:.1f}",
                        "dead-lettered": number_text(float(runs[col("dead_lettered")].mean())),
                        "p99 of successes s": "n/a" if pd.isna(p99) else number_text(p99)})
    return out


def section(c) -> str:
    """The report's section of *c*'s ``classes.<class>.<key>`` columns; empty without."""
    found = rows(c)
    if not found:
        return ""
    table = pd.DataFrame(found).to_html(border=0, index=False, classes="kpis")
    return f"<h2>Per criticality class</h2><p class='note'>{NOTE}</p>{table}"

"""The report's replicas: per arm and tier with replicas, a row per replica (calls,
failures, ejections: the mean over replications; the state at the end: the most
replications'), the replicas with the most failures first for a large fleet."""

from __future__ import annotations

import html
from collections import Counter

import pandas as pd

from herdsim.analysis.kpis import number_text

SHOWN = 10  # rows per arm and tier


def section(c) -> str:
    """The report's section of *c*'s runs' ``replicas.<tier>.<i>.<key>`` columns; empty
    for a run without replicas."""
    found: dict[tuple[str, int], dict[str, str]] = {}
    for col in c.runs.columns:
        parts = str(col).split(".")
        if len(parts) == 4 and parts[0] == "replicas" and parts[2].isdigit():
            found.setdefault((parts[1], int(parts[2])), {})[parts[3]] = col
    if not found:
        return ""
    rows, cut = [], []
    for arm, runs in c.runs.groupby("arm", sort=False):
        for tier in dict.fromkeys(t for t, _ in found):
            mine = [(i, cols) for (t, i), cols in sorted(found.items()) if t == tier]
            stats = [_row(arm, tier, i, cols, runs) for i, cols in mine]
            if len(stats) > SHOWN:
                cut.append(f"{html.escape(str(arm))}, {html.escape(tier)}: the {SHOWN} of "
                           f"{len(stats)} replicas with the most failures")
                worst = sorted(stats, key=lambda r: -r["_failures"])[:SHOWN]
                stats = sorted(worst, key=lambda r: r["replica"])
            rows += stats
    table = pd.DataFrame(rows).drop(columns="_failures").to_html(
        border=0, index=False, classes="kpis")
    note = ("Each replica of a tier with replicas (summary.json's <code>replicas</code>): "
            "calls its balancer sent it, failures (answered with anything but success), "
            "ejections by outlier detection, the mean over replications; its state at "
            "the end of the run, the most replications'.")
    if cut:
        note += " Shown: " + "; ".join(cut) + "."
    return f"<h2>Per replica</h2><p class='note'>{note}</p>{table}"


def _row(arm, tier: str, i: int, cols: dict[str, str], runs: pd.DataFrame) -> dict:
    mean = {k: float(runs[cols[k]].mean()) for k in ("calls", "failures", "ejections")
            if k in cols}
    state = Counter(runs[cols["state"]]).most_common(1)[0][0] if "state" in cols else "n/a"
    return {"arm": arm, "tier": tier, "replica": i,
            **{k: number_text(v) for k, v in mean.items()}, "state at the end": state,
            "_failures": mean.get("failures", 0.0)}

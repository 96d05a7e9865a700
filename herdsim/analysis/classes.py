"""The summary's ``classes``: per criticality class (``workload.criticality``), its
jobs, how many succeeded and were dead-lettered, its succeeded share and the p99 latency
of its successes. Only for a run with classes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis.summary import order_statistic
from herdsim.policies.criticality import CLASSES

KEYS = ("jobs", "succeeded", "dead_lettered", "succeeded_fraction", "latency_p99")


def summarize(jobs: pd.DataFrame, mix) -> dict[str, dict[str, Any]]:
    """``classes``: each class of *mix* with a share above 0 -> its numbers."""
    out = {}
    for name, share in zip(CLASSES, mix.shares(), strict=True):
        if not share:
            continue
        mine = jobs[jobs["criticality"] == name]
        ok = mine["outcome"] == "succeeded"
        latencies = np.sort(mine.loc[ok, "latency"].to_numpy())
        n = len(mine)
        out[name] = {
            "jobs": n, "succeeded": int(ok.sum()),
            "dead_lettered": int((mine["outcome"] == "dead_lettered").sum()),
            "succeeded_fraction": float(ok.sum() / n) if n else None,
            "latency_p99": (float(latencies[order_statistic(latencies, 0.99)])
                            if len(latencies) else None)}
    return out


def flat(classes: dict) -> dict[str, Any]:
    """*classes* spread into ``classes.<class>.<key>`` entries."""
    return {f"classes.{name}.{key}": value for name, row in classes.items()
            for key, value in row.items()}


def problem(classes: Any) -> str | None:
    """What is wrong with a summary's ``classes``, if anything."""
    if not isinstance(classes, dict) or not classes:
        return "classes must be an object of criticality classes"
    for name, row in classes.items():
        if name not in CLASSES or not isinstance(row, dict):
            return f"classes.{name}: not one of {', '.join(CLASSES)} with its numbers"
        for key in KEYS:
            value = row.get(key)
            if value is None and key in ("succeeded_fraction", "latency_p99"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                return f"classes.{name}.{key} must be a number >= 0, got {value!r:.40}"
    return None

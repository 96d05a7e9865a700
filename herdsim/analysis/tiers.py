"""A call graph's numbers per tier: time-series columns and the summary's ``tiers``.

Columns are ``<service>_calls``, ``<service>_succeeded``, ``<service>_failed`` and
``<service>_wasted`` (events per bin); the summary's ``tiers`` maps each service to the
keys of :data:`herdsim.analysis.kpis.TIER_REGISTRY`; :func:`crashes` lists when each tier
crashed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis.kpis import TIER_BY_KEY
from herdsim.analysis.summary import peak_rate

SERIES = {"calls": "attempts", "succeeded": "succeeded", "failed": "failed",
          "wasted": "wasted"}  # column suffix -> the TierRecord's array


def _counts(times, width: float, n_bins: int) -> np.ndarray:
    times = np.asarray(times, dtype=float)
    index = (times / width).astype(np.int64)
    np.clip(index, 0, n_bins - 1, out=index)
    return np.bincount(index, minlength=n_bins)


def columns(ts: pd.DataFrame, records: dict, width: float) -> pd.DataFrame:
    """*ts* with every tier's columns appended (after the run's own)."""
    n_bins = len(ts)
    extra = {f"{name}_{suffix}": _counts(getattr(record, attr), width, n_bins)
             for name, record in records.items() for suffix, attr in SERIES.items()}
    return pd.concat([ts, pd.DataFrame(extra, index=ts.index)], axis=1)


CRASH_COLUMNS = ("tier", "time")


def no_crashes() -> pd.DataFrame:
    """An empty :func:`crashes` frame (a run without a call graph)."""
    return pd.DataFrame({"tier": pd.Series(dtype=object), "time": pd.Series(dtype=float)})


def crashes(records: dict) -> pd.DataFrame:
    """``tier``, ``time``: every crash of every tier of a call graph, tier by tier (what
    a timeline draws as each tier's down periods; the summary counts them)."""
    rows = [(name, t) for name, record in records.items() for t in record.crashes]
    return pd.DataFrame(rows, columns=list(CRASH_COLUMNS)) if rows else no_crashes()


def summarize(records: dict, succeeded_jobs: int, peak_window: float) -> dict[str, dict]:
    """``tiers``: service -> its KPIs (:data:`~herdsim.analysis.kpis.TIER_REGISTRY`)."""
    out = {}
    for name, record in records.items():
        calls = len(record.attempts)
        peak = peak_rate(np.asarray(record.attempts, dtype=float), peak_window)
        out[name] = {
            "calls": calls,
            "succeeded_calls": len(record.succeeded),
            "failed_calls": len(record.failed),
            "wasted_calls": len(record.wasted),
            "collapses": len(record.crashes),
            "peak_to_capacity": peak / record.capacity if record.capacity else None,
            "amplification": calls / succeeded_jobs if succeeded_jobs else None,
        }
    return out


def flat(summary: dict) -> dict:
    """*summary* with ``tiers`` spread into ``tiers.<service>.<key>`` entries (one column
    each in a table of runs)."""
    if "tiers" not in summary:
        return summary
    rest = {k: v for k, v in summary.items() if k != "tiers"}
    for name, kpis in summary["tiers"].items():
        for key, value in kpis.items():
            rest[f"tiers.{name}.{key}"] = value
    return rest


def problem(tiers: Any, check) -> str | None:
    """What is wrong with a summary's ``tiers``, if anything; *check(kind, value)* is the
    reader's check of one KPI's value."""
    if not isinstance(tiers, dict) or not tiers:
        return "tiers must be an object of services"
    for name, kpis in tiers.items():
        if not isinstance(kpis, dict):
            return f"tiers.{name} must be an object of KPIs"
        for key, kpi in TIER_BY_KEY.items():
            value = kpis.get(key)
            if value is None and kpi.kind == "count":
                return f"tiers.{name}.{key} is missing"
            found = check(kpi.kind, value) if value is not None else None
            if found:
                return f"tiers.{name}.{key} must be {found}, got {str(value)[:40]!r}"
    return None

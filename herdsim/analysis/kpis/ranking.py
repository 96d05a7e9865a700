"""How arms are ranked: by the KPIs with a ``rank`` panel, first place first, each its own
way (a KPI of classes by its class, best first; any other by its better direction), an
undefined value last."""

from __future__ import annotations

import pandas as pd

from herdsim.analysis.kpis.base import KPI, on
from herdsim.analysis.kpis.run import REGISTRY


def rank(summary: pd.DataFrame, registry: tuple[KPI, ...] | None = None) -> pd.DataFrame:
    """Arms (rows of a comparison's summary) best first: by state, recovered before
    degraded before metastable; then by recovery time (undefined last), completion time
    (occ), goodput and succeeded fraction (higher first), then peak over capacity and over
    baseline (the rank panels of *registry*, the run registry by default)."""
    registry = REGISTRY if registry is None else registry
    order, keys, ascending, scratch = summary, [], [], []
    for kpi in on("rank", registry):
        if kpi.key not in summary:
            continue
        key = kpi.key
        if kpi.classes:  # a class: its place among the classes, best first (none: last,
            key = f"{kpi.key}_rank"  # a prediction's near threshold)
            places = {name: place for place, name in enumerate(kpi.classes)}
            order = order.assign(**{key: summary[kpi.key].map(places)})
            scratch.append(key)
        keys.append(key)
        ascending.append(kpi.better != "higher")
    order = order.sort_values(keys, ascending=ascending, kind="stable", na_position="last")
    return order.drop(columns=scratch).reset_index(drop=True)

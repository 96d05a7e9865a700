"""The KPI registry: every summary number is one :class:`KPI` object that computes itself
from a run's frames (:func:`summarize` is a loop over :data:`REGISTRY`) and says how it is
presented: label, unit, kind, better direction, bounds, and the panel of each surface that
shows it (:func:`on`). CLI tables, figures, the report, the verdict, the gate and the docs
test all ask the objects. To add a KPI: one object in :mod:`.run` (its place there is its
place in ``summary.json``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from herdsim.analysis.kpis import base
from herdsim.analysis.kpis.base import (
    BOUNDS_NOTE,
    KPI,
    NA,
    SURFACES,
    Kind,
    Panel,
    format_kpi,
    format_value,
    number_text,
    percent,
    undefined,
    window_text,
)
from herdsim.analysis.kpis.frames import Run, summarize
from herdsim.analysis.kpis.ranking import rank
from herdsim.analysis.kpis.run import BY_KEY, REGISTRY, STATE_MEANING, STATES
from herdsim.analysis.kpis.tiers import TIER_BY_KEY, TIER_REGISTRY

__all__ = ["BOUNDS_NOTE", "BY_KEY", "KPI", "NA", "REGISTRY", "STATES", "STATE_MEANING",
           "SURFACES", "TIER_BY_KEY", "TIER_REGISTRY", "Kind", "Panel", "Run",
           "format_kpi", "format_value", "kpi_of", "number_text", "on",
           "percent", "rank", "show", "summarize", "undefined", "window_text"]


def kpi_of(key: str) -> KPI:
    """The registry's KPI *key*; an unknown key: a plain real number of that name."""
    return BY_KEY.get(key) or KPI(key, key)


def on(surface: str, registry: tuple[KPI, ...] | None = None) -> list[KPI]:
    """The KPIs *surface* (one of :data:`SURFACES`) shows, in its order (of the run
    registry unless *registry* is given)."""
    return base.on(surface, REGISTRY if registry is None else registry)


def show(key: str, value: Any, summary: dict | None = None, ci: float = np.nan) -> str:
    """KPI *key*'s *value* as every table shows it (:meth:`KPI.show`)."""
    return kpi_of(key).show(value, summary, ci)


"""A call graph's per-tier KPIs: summary.json's ``tiers.<service>.<key>``, computed by
:mod:`herdsim.analysis.tiers`; the tier table (surface ``run``) shows them in its order."""

from __future__ import annotations

from herdsim.analysis.kpis.base import KPI, Panel
from herdsim.analysis.kpis.run import STATES
from herdsim.analysis.metastability import NOT_RECOVERED

TIER_REGISTRY: tuple[KPI, ...] = (
    KPI("state", "state", kind="text",
        meaning="recovered, degraded or metastable: the classifier on the tier's own "
                "numbers (the top tier: the run's state; docs/model.md, call graphs)",
        classes=STATES, across="majority", panels={"run": Panel(1)}),
    KPI("calls", "calls", kind="count",
        meaning="calls that reached the tier: every attempt of every caller, hedge "
                "copies included", panels={"run": Panel(2)}),
    KPI("succeeded_calls", "succeeded", kind="count", better="higher",
        meaning="calls the tier answered with a success its caller received",
        panels={"run": Panel(3)}),
    KPI("failed_calls", "failed", kind="count", better="lower",
        meaning="calls that failed: refused at once, an error (its own or a "
                "dependency's), the caller's timeout, or failed at t0",
        panels={"run": Panel(4)}),
    KPI("wasted_calls", "wasted", kind="count", better="lower",
        meaning="calls the tier finished serving after its caller had given up",
        panels={"run": Panel(5)}),
    KPI("collapses", "collapses", kind="count", better="lower",
        meaning="times the tier crashed (overload.collapse)", panels={"run": Panel(6)}),
    KPI("peak_to_capacity", "peak / capacity", "×", better="lower",
        meaning="the tier's busiest peak_window of calls over its capacity "
                "(concurrency / mean service time, or its rate limit)",
        panels={"run": Panel(7)}),
    KPI("amplification", "calls per success", "calls/succeeded job", better="lower",
        meaning="calls at the tier per job the workers finished with success",
        missing="no job succeeded", panels={"run": Panel(8)}),
    KPI("recovery_time", "recovery", "s", better="lower",
        meaning="seconds from the last outage's end until the tier is healthy for good",
        missing=NOT_RECOVERED, needs=("outage",), unreached="not recovered",
        panels={"run": Panel(9)}),
    KPI("collapses_after_outage", "collapses after the outage", kind="count",
        better="lower", meaning="the tier's crashes after the last outage ended"),
    KPI("peak_calls", "peak calls", kind="count", better="lower",
        meaning="calls reaching the tier in its busiest peak_window"),
    KPI("capacity_rate", "capacity", "calls/s",
        meaning="calls per second the healthy tier serves"),
    KPI("peak_to_baseline", "peak / pre-outage peak", "×", better="lower",
        meaning="the tier's busiest peak_window from the first outage on over the busiest "
                "before it", missing="no pre-outage period"),
)
TIER_BY_KEY = {kpi.key: kpi for kpi in TIER_REGISTRY}

"""A call graph's per-tier KPIs, in the order of summary.json's ``tiers.<service>``: each
computes itself from one tier (:class:`herdsim.analysis.tiers.Tier`: its record, its
health, the run's summary); the tier table (``run``) and the report (``report``) show them
in their orders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herdsim.analysis import cache
from herdsim.analysis.kpis.base import KPI, Panel
from herdsim.analysis.kpis.run import STATES
from herdsim.analysis.metastability import NOT_RECOVERED


def _own(key: str) -> Callable[[Any], Any]:
    """A KPI the top tier takes from the run's summary (the workers' view, their backlog
    included) and any other tier from its own health (:meth:`Tier.own`)."""
    return lambda tier: tier.own(key)


def _prefix(tier: Any) -> str:
    """The prefix of the tier's columns: none for the top tier (the run's own)."""
    return "" if tier.top else f"{tier.name}_"


def _loop(key: str, **fields: Any) -> KPI:
    """A loop KPI of a held-down tier (:meth:`Tier.loop`), shown in no table: a call
    graph's headline takes its headline tier's (:mod:`herdsim.analysis.headline`)."""
    return KPI(key, key.replace("_", " "), optional=True,
               compute=lambda tier: tier.loop(key),
               present=lambda tier: tier.held(key), **fields)


def _flush(tier: Any) -> float | None:
    """The start of the tier's last flush outage (None: its cache is never flushed)."""
    if tier.cfg.cache is None:
        return None
    starts = [o.start for o in tier.cfg.outages if o.needs_cache]
    return max(starts) if starts else None


def _ratio(top: float, bottom: float | None) -> float | None:
    return top / bottom if bottom else None


TIER_REGISTRY: tuple[KPI, ...] = (
    KPI("state", "state", kind="text",
        meaning="recovered, degraded or metastable: the classifier on the tier's own "
                "numbers (the top tier: the run's state; docs/model.md, call graphs)",
        classes=STATES, across="majority", compute=_own("state"),
        panels={"run": Panel(1), "report": Panel(1)}),
    KPI("calls", "calls", kind="count",
        meaning="calls that reached the tier: every attempt of every caller, hedge "
                "copies included", compute=lambda tier: len(tier.record.attempts),
        panels={"run": Panel(2), "report": Panel(2)}),
    KPI("succeeded_calls", "succeeded", kind="count", better="higher",
        meaning="calls the tier answered with a success its caller received",
        compute=lambda tier: len(tier.record.succeeded),
        panels={"run": Panel(3), "report": Panel(3)}),
    KPI("failed_calls", "failed", kind="count", better="lower",
        meaning="calls that failed: refused at once, an error (its own or a "
                "dependency's), the caller's timeout, or failed at t0",
        compute=lambda tier: len(tier.record.failed),
        panels={"run": Panel(4), "report": Panel(4)}),
    KPI("wasted_calls", "wasted", kind="count", better="lower",
        meaning="calls the tier finished serving after its caller had given up",
        compute=lambda tier: len(tier.record.wasted),
        panels={"run": Panel(5), "report": Panel(5)}),
    KPI("collapses", "collapses", kind="count", better="lower",
        meaning="times the tier crashed (overload.collapse)",
        compute=lambda tier: len(tier.record.crashes),
        panels={"run": Panel(6), "report": Panel(6)}),
    KPI("peak_to_capacity", "peak / capacity", "×", better="lower",
        meaning="the tier's busiest peak_window of calls over its capacity "
                "(concurrency / mean service time, or its rate limit)",
        compute=lambda tier: _ratio(tier.peak, tier.record.capacity),
        panels={"run": Panel(7), "report": Panel(7)}),
    KPI("amplification", "calls per success", "calls/succeeded job", better="lower",
        meaning="calls at the tier per job the workers finished with success",
        missing="no job succeeded",
        compute=lambda tier: _ratio(len(tier.record.attempts), tier.summary["jobs_succeeded"]),
        panels={"run": Panel(8), "report": Panel(8)}),
    KPI("capacity_rate", "capacity", "calls/s",
        meaning="calls per second the healthy tier serves",
        compute=lambda tier: tier.record.capacity, panels={"report": Panel(12)}),
    KPI("peak_calls", "peak calls", kind="count", better="lower",
        meaning="calls reaching the tier in its busiest peak_window",
        compute=lambda tier: int(round(tier.peak * tier.scenario.peak_window)),
        panels={"report": Panel(11)}),
    KPI("recovery_time", "recovery", "s", better="lower",
        meaning="seconds from the last outage's end until the tier is healthy for good",
        missing=NOT_RECOVERED, needs=("outage",), unreached="not recovered",
        compute=_own("recovery_time"), panels={"run": Panel(9), "report": Panel(9)}),
    KPI("collapses_after_outage", "collapses after the outage", kind="count",
        better="lower", meaning="the tier's crashes after the last outage ended",
        compute=_own("collapses_after_outage"), panels={"report": Panel(10)}),
    KPI("peak_to_baseline", "peak / pre-outage peak", "×", better="lower",
        meaning="the tier's busiest peak_window from the first outage on over the busiest "
                "before it", missing="no pre-outage period",
        compute=_own("peak_to_baseline"), panels={"report": Panel(13)}),
    # only a tier with a cache in front (the top tier's columns are the run's own)
    KPI("cache_hit_rate", "cache hit rate", kind="fraction", better="higher",
        meaning="hits over requests at the tier's cache, over the whole run",
        compute=lambda tier: cache.overall(tier.ts, 0.0, _prefix(tier)),
        present=lambda tier: tier.cfg.cache is not None,
        panels={"run": Panel(10), "report": Panel(14)}),
    KPI("cache_hit_rate_tail", "cache hit rate (tail)", kind="fraction", better="higher",
        meaning="hits over requests at the tier's cache over the run's last 10%",
        compute=lambda tier: cache.tail_rate(tier.ts, tier.scenario.duration, _prefix(tier)),
        present=lambda tier: tier.cfg.cache is not None,
        panels={"run": Panel(11), "report": Panel(15)}),
    # a degraded or metastable tier: its loops over the run's tail (docs/mitigations.md)
    _loop("sustained_by", kind="text", across="mode",
          meaning="the loops measured over the tail of a degraded or metastable tier: the "
                  "run's sustained_by on the tier's own numbers (no busy-slot ratio off "
                  "the top tier)"),
    _loop("tail_calls_per_job", unit="calls/job",
          meaning="the tier's calls over the run's tail over the calls the jobs arrived "
                  "then need of it", missing="no job arrived in the tail"),
    _loop("tail_down_fraction", kind="fraction",
          meaning="share of the run's tail the tier was down"),
    _loop("tail_hit_rate", kind="fraction",
          meaning="hits over requests at the tier's cache over the run's tail",
          missing="no request in the tail"),
    _loop("hit_rate_before", kind="fraction",
          meaning="hits over requests at the tier's cache before the first trigger",
          missing="not measured: a cold start, or nothing before the trigger"),
    KPI("cache_refill_time", "cache refill time", "s", better="lower",
        meaning="seconds from the tier's last flush until a bin's hit rate at its cache is "
                "back to 90% of its rate before the flush", missing="not refilled",
        unreached="not refilled",
        compute=lambda tier: cache.flush_refill(tier.ts, _flush(tier), tier.scenario.bin,
                                                _prefix(tier)),
        present=lambda tier: _flush(tier) is not None,
        panels={"report": Panel(15.5)}),  # (the run's table has no room for it)
    KPI("costly_refusals_total", "refusals that cost server time", kind="count",
        meaning="the tier's refusals that took a slot for their refusal_cost",
        compute=lambda tier: int(tier.ts[f"{_prefix(tier)}costly_refusals"].sum()),
        present=lambda tier: f"{_prefix(tier)}costly_refusals" in tier.ts,
        panels={"report": Panel(18)}),
    # only a degrading tier (downstream.degradation or services.<name>.degradation)
    KPI("degradation_peak", "degradation factor peak", "×", better="lower",
        meaning="the largest factor on the tier's service time, at a bin start",
        compute=lambda tier: float(tier.ts[f"{_prefix(tier)}degradation"].max()),
        present=lambda tier: f"{_prefix(tier)}degradation" in tier.ts,
        panels={"run": Panel(12), "report": Panel(16)}),
    KPI("degradation_end", "degradation factor at the end", "×", better="lower",
        meaning="the factor on the tier's service time at the last bin start",
        compute=lambda tier: float(tier.ts[f"{_prefix(tier)}degradation"].iloc[-1]),
        present=lambda tier: f"{_prefix(tier)}degradation" in tier.ts,
        panels={"report": Panel(17)}),
)
TIER_BY_KEY = {kpi.key: kpi for kpi in TIER_REGISTRY}

"""The KPIs of a cache in front of the workers' downstream, present only in a run that
has one (:mod:`herdsim.analysis.cache`)."""

from __future__ import annotations

from herdsim.analysis import cache
from herdsim.analysis.kpis.base import KPI, Panel


def _cached(run) -> bool:
    return cache.has_cache(run.ts)


def _flush(run) -> float | None:
    """The last flush outage's start on the workers' downstream (None: none)."""
    starts = [o.start for o in run.scenario.downstream.outages if o.needs_cache]
    return max(starts) if starts else None


CACHE_KPIS: tuple[KPI, ...] = (
    KPI("cache_hits", "cache hits", kind="count", better="higher",
        meaning="requests the cache answered (stale ones included) without the tier",
        compute=lambda run: int(run.ts[cache.HIT].sum()), present=_cached,
        panels={"run": Panel(43)}),
    KPI("cache_misses", "cache misses", kind="count", better="lower",
        meaning="requests the cache did not answer: each a call to the tier or, coalesced, "
                "a wait on one", compute=lambda run: int(run.ts[cache.MISS].sum()),
        present=_cached, panels={"run": Panel(44)}),
    KPI("cache_hit_rate", "cache hit rate", kind="fraction", better="higher",
        meaning="hits over requests, over the whole run",
        compute=lambda run: cache.overall(run.ts), present=_cached,
        panels={"run": Panel(45), "compare": Panel(18, "hit rate"),
                "report": Panel(14, group="load on the downstream")}),
    KPI("cache_hit_rate_tail", "cache hit rate (tail)", kind="fraction", better="higher",
        meaning="hits over requests over the run's last 10%: has the cache come back?",
        compute=lambda run: cache.tail_rate(run.ts, run.scenario.duration), present=_cached,
        panels={"run": Panel(46), "compare": Panel(19, "tail hit rate"),
                "report": Panel(15, group="load on the downstream")}),
    KPI("cache_refill_time", "cache refill time", "s", better="lower",
        meaning="seconds from the last flush until a bin's hit rate is back to 90% of its "
                "rate before the flush", missing="not refilled", unreached="not refilled",
        compute=lambda run: cache.flush_refill(run.ts, _flush(run), run.scenario.bin),
        present=lambda run: _cached(run) and _flush(run) is not None,
        panels={"run": Panel(47), "compare": Panel(20, "refill s"),
                "report": Panel(16, group="outcome")}),
)

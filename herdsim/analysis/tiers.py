"""A call graph's numbers per tier: time-series columns and the summary's ``tiers``.

Columns are ``<service>_calls``, ``<service>_succeeded``, ``<service>_failed`` and
``<service>_wasted`` (events per bin); the summary's ``tiers`` maps each service to the
keys of :data:`herdsim.analysis.kpis.TIER_REGISTRY`.

A tier's ``state`` is the run's classifier on the tier's own numbers. The workers'
downstream (the top tier) has the run's: what the workers see, their backlog included.
A service tier is healthy while it is up (not crashed, no ``down`` outage) and its
successful calls (with a cache, and the requests it answered) over the trailing window
are back to 90% of their pre-outage level
(:func:`herdsim.analysis.summary.settle_time`; a tier has no backlog of its own); its
goodput is its successful calls over what the offered jobs need of it
(:func:`demand`), its load the same demand over its capacity.
:func:`crashes` lists when each tier crashed.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis import classes, loops, metastability, replicas
from herdsim.analysis import summary as run_summary
from herdsim.analysis.kpis import TIER_BY_KEY, TIER_REGISTRY
from herdsim.analysis.summary import peak_rate
from herdsim.config import graph
from herdsim.config.scenario import Scenario

SERIES = {"calls": "attempts", "succeeded": "succeeded", "failed": "failed",
          "wasted": "wasted"}  # column suffix -> the TierRecord's array
REQUIRED = ("calls", "succeeded_calls", "failed_calls", "wasted_calls", "collapses")
COSTLY = "costly_refusals"  # a service's refusals that took a slot (refusal_cost)


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
    # a service's cache, fleet, costly refusals and degradation factor (the top tier's
    # are ts's own)
    for name, record in list(records.items())[1:]:
        extra.update({f"{name}_{counter}": _counts(times, width, n_bins)
                      for counter, times in record.optional.items()
                      if counter.startswith("cache_") or counter == COSTLY
                      or replicas.fleet_counter(counter)})
        extra.update({f"{name}_{gauge}": np.asarray(samples[:n_bins], dtype=float)
                      for gauge, samples in record.gauges.items()
                      if (gauge.startswith("replica") or gauge == "degradation")
                      and len(samples) >= n_bins})
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


def demand(configs: dict[str, graph.Caller]) -> dict[str, float]:
    """Calls each tier serves per job when nothing fails: 1 at the top, and down every
    edge the caller's demand times the edge's ``count``, summed over the paths (0 for a
    tier no path reaches)."""
    top = next(iter(configs))
    order = graph.callers_first(configs)  # a walk without recursion
    need = dict.fromkeys(configs, 0.0)
    need[top] = 1.0
    for name in order:
        for edge in configs[name].calls:
            need[edge.service] += need[name] * edge.count
    return need


def _up(times: np.ndarray, crashes, cfg: graph.Caller) -> np.ndarray:
    """1 at each bin start the tier is up (not crashed, no ``down`` outage), else 0."""
    down = np.zeros(len(times), dtype=bool)
    restart = cfg.overload.collapse.restart_time if cfg.overload.collapse else 0.0
    for start in crashes:
        down |= (times >= start) & (times < start + restart)
    for outage in cfg.outages:
        if outage.refuses:
            down |= (times >= outage.start) & (times < outage.end)
    return (~down).astype(float)


def _health(name: str, record, cfg: graph.Caller, need: float, ts: pd.DataFrame,
            scenario: Scenario) -> dict[str, Any]:
    """A service tier's ``state``, ``recovery_time`` and ``collapses_after_outage`` (the
    module doc's rule)."""
    times = ts["time"].to_numpy()
    zero = np.zeros(len(times))
    served = ts[f"{name}_succeeded"].to_numpy()
    if cfg.cache is not None:  # a request its cache answered is served too
        served = served + ts[f"{name}_cache_hits"].to_numpy()
    own = pd.DataFrame({"time": times, "success": served,
                        "downstream_up": _up(times, record.crashes, cfg), "queue_depth": zero,
                        "delayed": zero, "in_flight": zero, "waiting": zero})
    last = scenario.last_outage_end
    after = sum(1 for t in record.crashes if last is not None and t >= last)
    kpis: dict[str, Any] = {"load": 0.0, "goodput_tail": None,
                            "outage_seconds": float(sum(o.duration
                                                        for o in scenario.all_outages))}
    if need > 0:
        kpis = metastability.frame_kpis(own.assign(success=own["success"] / need), scenario)
        kpis["load"] = scenario.workload.rate * need / record.capacity
    found = {"recovery_time": run_summary.recovery_time(own, scenario),
             "collapses_after_outage": after}
    return {"state": run_summary.state(found, own, scenario, kpis), **found}


class Tier:
    """One tier of a call graph as its KPIs read it: its record (calls, outcomes,
    crashes, capacity), the run's *summary*, *ts* with the tiers' columns, the scenario,
    and what the tier's jobs need of it (*need* calls per job)."""

    def __init__(self, name: str, record, top: bool, cfg: graph.Caller, need: float,
                 summary: dict, ts: pd.DataFrame, scenario: Scenario) -> None:
        self.name, self.record, self.top, self.cfg, self.need = name, record, top, cfg, need
        self.summary: dict = summary
        self.ts: pd.DataFrame = ts
        self.scenario: Scenario = scenario

    @cached_property
    def attempts(self) -> np.ndarray:
        return np.asarray(self.record.attempts, dtype=float)

    @cached_property
    def peak(self) -> float:
        """Calls per second reaching the tier in its busiest peak window."""
        return peak_rate(self.attempts, self.scenario.peak_window)

    @cached_property
    def health(self) -> dict[str, Any]:
        """A service tier's ``state``, ``recovery_time``, ``collapses_after_outage``
        and ``peak_to_baseline`` from its own numbers."""
        return {**_health(self.name, self.record, self.cfg, self.need, self.ts, self.scenario),
                "peak_to_baseline": run_summary.peak_to_baseline(self.attempts, self.scenario)}

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The tier as the loops read it (:func:`herdsim.analysis.loops.tier_frame`)."""
        times = self.ts["time"].to_numpy()
        return loops.tier_frame(self.ts, self.name, self.need, self.record.crashes,
                                _up(times, self.record.crashes, self.cfg))

    def held(self, key: str) -> bool:
        """Whether the tier has loop KPI *key*: the top tier when the run's summary has
        it, any other when its state is not recovered (and *key* a cache's: it has one)."""
        if self.top:
            return key in self.summary
        cached = key not in ("tail_hit_rate", "hit_rate_before") or self.cfg.cache is not None
        return self.health["state"] != "recovered" and cached

    def loop(self, key: str) -> Any:
        """Loop KPI *key* (:mod:`herdsim.analysis.loops`): the top tier's is the run's, any
        other's read off its own columns."""
        if self.top:
            return self.summary[key]
        frame, sc = self.frame, self.scenario
        return {"sustained_by": lambda: loops.sustained_by(frame, sc, self.cfg),
                "tail_calls_per_job": lambda: loops.calls_per_job(frame, sc),
                "tail_down_fraction": lambda: loops.down_fraction(frame, sc),
                "tail_hit_rate": lambda: loops.tail_hit_rate(frame, sc),
                "hit_rate_before": lambda: loops.hit_rate_before(frame, sc, self.cfg)}[key]()

    def own(self, key: str) -> Any:
        """KPI *key* of the tier's health: the top tier's is the run's (what the workers
        see, their backlog included), any other's its own (:attr:`health`)."""
        return self.summary[key] if self.top else self.health[key]


def summarize(records: dict, summary: dict, ts: pd.DataFrame, scenario: Scenario
              ) -> dict[str, dict]:
    """``tiers``: service -> its KPIs, a loop over
    :data:`~herdsim.analysis.kpis.TIER_REGISTRY`; *summary* is the run's own, *ts* the
    time series with the tiers' columns."""
    configs = graph.tiers(scenario.downstream, scenario.services)
    need = demand(configs)
    out = {}
    for i, (name, record) in enumerate(records.items()):
        tier = Tier(name, record, i == 0, configs[name], need[name], summary, ts, scenario)
        out[name] = {kpi.key: kpi.compute(tier) for kpi in TIER_REGISTRY
                     if kpi.compute is not None
                     and (kpi.present is None or kpi.present(tier))}
    return out


def flat(summary: dict) -> dict:
    """*summary* with ``tiers`` spread into ``tiers.<service>.<key>`` entries (one column
    each in a table of runs)."""
    if not {"tiers", "replicas", "classes"} & set(summary):
        return summary
    rest = {k: v for k, v in summary.items() if k not in ("tiers", "replicas", "classes")}
    rest.update(replicas.flat(summary.get("replicas", {})))
    rest.update(classes.flat(summary.get("classes", {})))
    for name, kpis in summary.get("tiers", {}).items():
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
            if value is None and key in REQUIRED:  # (older runs have only these)
                return f"tiers.{name}.{key} is missing"
            found = check(kpi.kind, value) if value is not None else None
            if kpi.classes and value is not None and value not in kpi.classes:
                found = f"one of {', '.join(kpi.classes)}"
            if found:
                return f"tiers.{name}.{key} must be {found}, got {str(value)[:40]!r}"
    return None

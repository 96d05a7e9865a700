"""A run as the KPIs read it: its frames, its scenario, and each KPI's value computed once,
on demand (a KPI may read others: ``state`` reads ``recovery_time``). :func:`summarize` is a
loop over the registry."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis import summary as rules
from herdsim.analysis.kpis.run import REGISTRY
from herdsim.config.scenario import Scenario
from herdsim.policies import downstreams


class Run(Mapping[str, Any]):
    """One run's frames (time series, jobs, call and crash times), its scenario and what
    the model measured beside them: a mapping of the KPIs the run has, ``run[key]``
    computed once (a value the model supplied in *extra* wins)."""

    def __init__(self, ts: pd.DataFrame, jobs: pd.DataFrame, attempt_times: np.ndarray,
                 crash_times: Sequence[float], scenario: Scenario, wall: float,
                 breaker_trips: int = 0, breaker_open_time: float = 0.0,
                 extra: dict | None = None, registry: tuple = ()) -> None:
        self.ts: pd.DataFrame = ts
        self.jobs: pd.DataFrame = jobs
        self.scenario: Scenario = scenario
        self.wall: float = wall
        self.attempt_times: np.ndarray = attempt_times
        self.crash_times: Sequence[float] = crash_times
        self.breaker_trips: int = breaker_trips
        self.breaker_open_time: float = breaker_open_time
        self.extra: dict[str, Any] = dict(extra or {})
        self._kpis = {kpi.key: kpi for kpi in registry}
        self._values: dict[str, Any] = dict(self.extra)

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            kpi = self._kpis.get(key)
            if kpi is None or kpi.compute is None or not kpi.has(self):
                raise KeyError(key)
            self._values[key] = kpi.compute(self)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return (key for key, kpi in self._kpis.items() if kpi.has(self))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def total(self, column: str) -> int:
        """The sum of a time-series counter over the run."""
        return int(self.ts[column].sum())

    @cached_property
    def queueing(self) -> bool:
        """Whether the downstream model serves a queue (occ does not)."""
        return downstreams.named(self.scenario.downstream.model).queueing

    @cached_property
    def outcomes(self) -> dict[str, int]:
        """Jobs per outcome: ``succeeded``, ``dead_lettered``, ``merged``."""
        outcome = self.jobs["outcome"]
        return {name: int((outcome == name).sum())
                for name in ("succeeded", "dead_lettered", "merged")}

    @cached_property
    def capacity(self) -> float | None:
        """The bounded capacity (calls/s), None when unbounded or not a queue."""
        return rules.bounded_capacity(self.scenario) if self.queueing else None

    @cached_property
    def peak(self) -> float:
        """Calls per second in the busiest peak window."""
        return rules.peak_rate(self.attempt_times, self.scenario.peak_window)

    @cached_property
    def calling(self) -> int:
        """Jobs that made at least one call."""
        return int((self.jobs["attempts"].to_numpy() > 0).sum())

    @cached_property
    def latency(self) -> dict:
        """Every latency KPI at once (:func:`~herdsim.analysis.summary.latency_quantiles`),
        merged jobs left out."""
        jobs = self.jobs
        if self.outcomes["merged"]:
            jobs = jobs[jobs["outcome"] != "merged"]
        return rules.latency_quantiles(jobs, self.scenario.duration)


def summarize(ts: pd.DataFrame, jobs: pd.DataFrame, attempt_times: np.ndarray,
              crash_times: Sequence[float], scenario: Scenario, wall: float,
              breaker_trips: int = 0, breaker_open_time: float = 0.0,
              extra: dict | None = None, registry: tuple | None = None) -> dict:
    """The KPIs of one run, as a flat dict of plain numbers (None where undefined), in the
    order of *registry* (the KPI registry): every KPI the run has (:meth:`KPI.has`).

    ``breaker_open_time`` is the mean time one breaker spent not closed (seconds);
    *extra* holds a model's own KPIs (occ: ``completion_time``, ``conflicts``), each a
    registry KPI; its values win over computed ones.
    """
    registry = REGISTRY if registry is None else registry
    unknown = set(extra or {}) - {kpi.key for kpi in registry}
    if unknown:
        raise KeyError(f"a model's KPIs must be in the KPI registry: {sorted(unknown)}")
    run = Run(ts, jobs, attempt_times, crash_times, scenario, wall, breaker_trips,
              breaker_open_time, extra, registry)
    return {kpi.key: run[kpi.key] for kpi in registry if kpi.has(run)}

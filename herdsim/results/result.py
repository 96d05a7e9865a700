"""What a run returns: pandas frames and a summary, from memory (saving lives in outputs)."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from herdsim.analysis import classes, headline, replicas, tiers
from herdsim.analysis.kpis import BOUNDS_NOTE, on, show, summarize, undefined
from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario
from herdsim.errors import UsageError
from herdsim.model.downstream.family import simulate
from herdsim.model.finished import Finished
from herdsim.model.recorder import GAUGES
from herdsim.model.simulation import Progress
from herdsim.planning import estimate
from herdsim.policies.durations import parse_duration
from herdsim.system.timings import phase

COLLECT_ABOVE = 1_000_000  # jobs + calls: a run this large collects its model's garbage first


@dataclass
class Result:
    """One run: ``timeseries`` (one row per bin), ``sleeps`` (every retry sleep drawn),
    ``jobs`` (one row per job), ``summary`` (the KPIs) and the resolved ``scenario``;
    a call graph's ``tier_crashes`` (``tier``, ``time`` of each crash of every tier)."""

    scenario: Scenario
    timeseries: pd.DataFrame
    sleeps: pd.DataFrame
    jobs: pd.DataFrame
    summary: dict
    attempt_times: np.ndarray = field(repr=False)
    crash_times: list[float] = field(default_factory=list)
    tier_crashes: pd.DataFrame = field(default_factory=tiers.no_crashes, repr=False)

    @classmethod
    def from_finished(cls, run: Finished) -> Result:
        """Turn a model's raw record into frames and KPIs (the jobs frame takes the
        recorder's finish rows over: once per record).

        A finished model's processes and events are cycles, garbage the collector would
        find later; a large run collects them first, so that the frames reuse their memory
        (a full collection costs tens of milliseconds: nothing beside such a run)."""
        rec, scenario = run.recorder, run.scenario
        if len(rec.arrivals) + len(rec.attempts) > COLLECT_ABOVE:
            gc.collect()
        ts = rec.timeseries(scenario.bin, run.n_bins)
        jobs = rec.jobs(run.pending)
        attempts = np.asarray(rec.attempts, dtype=float)
        summary = summarize(ts, jobs, attempts, rec.crashes, scenario, run.wall,
                            run.breaker_trips, run.breaker_open_time, run.extra)
        if run.tiers:  # a call graph: each tier's columns and numbers
            ts = tiers.columns(ts, run.tiers, scenario.bin)
            summary["tiers"] = tiers.summarize(run.tiers, summary, ts, scenario)
            summary = headline.apply(summary)
        if scenario.workload.criticality is not None:  # each criticality class's numbers
            summary["classes"] = classes.summarize(jobs, scenario.workload.criticality)
        if run.fleets:  # tiers with replicas: each replica's numbers
            summary["replicas"] = replicas.summarize(run.fleets)
        return cls(scenario, ts, rec.sleeps(), jobs, summary, attempts, list(rec.crashes),
                   tiers.crashes(run.tiers))

    def plot(self, kind: str = "timeline"):
        """A matplotlib Figure of this run (see :meth:`Comparison.plot`)."""
        from herdsim.results.comparison import Comparison

        return Comparison.from_result(self).plot(kind)

    def rates(self, window: float | str | None = None) -> pd.DataFrame:
        """Per-second rates of every counter of :attr:`timeseries` (``arrivals``,
        ``attempts``, ``success``, ``retry``, ...): ``time`` and one column per counter in
        events/s, over each bin, or over a trailing *window* (``"1s"``, rounded to a whole
        number of bins, at least one): the increase over the window divided by it, no
        extrapolation (the first bins count only what happened since t = 0)."""
        width = self.scenario.bin
        k = 1 if window is None else max(1, int(round(parse_duration(window) / width)))
        counters = [c for c in self.timeseries.columns if c != "time" and c not in GAUGES]
        counts = self.timeseries[counters].rolling(k, min_periods=1).sum()
        return pd.concat([self.timeseries[["time"]], counts / (k * width)], axis=1)

    def __repr__(self) -> str:
        s = self.summary
        return (f"<Result {self.scenario.name} ({s['strategy']}): {s['state']}, "
                f"{show('succeeded_fraction', s['succeeded_fraction'], s)} succeeded, "
                f"goodput {show('goodput', s['goodput'], s)}, recovery "
                f"{show('recovery_time', s['recovery_time'], s)}>")

    def _repr_html_(self) -> str:
        s = self.summary
        rows = "".join(
            f"<tr><td>{escape(kpi.title(s))}</td>"
            f"<td style='text-align:right'>{escape(kpi.show(s[kpi.key], s))}"
            f"</td><td>{escape(kpi.unit if not undefined(s[kpi.key]) else '')}</td></tr>"
            for kpi in on("run") if kpi.listed(s))
        note = (f"<p>latency {escape(BOUNDS_NOTE)}</p>"
                if self.summary.get("latency_censored") else "")
        return (f"<b>herdsim run: {escape(self.scenario.name)} — "
                f"{escape(self.scenario.retry.strategy)}</b><table><tr><th>KPI</th>"
                f"<th>value</th><th>unit</th></tr>{rows}</table>{note}")


def run(scenario: Scenario | str | Path | dict, progress: Progress | None = None,
        force: bool = False) -> Result:
    """Run *scenario* (a :class:`Scenario`, or what :func:`load_scenario` reads) once and
    return its :class:`Result`.

    *progress*, if given, is called as ``progress(now, duration)`` (simulated seconds
    done, of the run's total) about 200 times during the run and once at its end. A run
    this machine cannot hold is refused before simulating
    (:class:`~herdsim.errors.CapacityError`, see :mod:`herdsim.planning.estimate`) unless
    *force*."""
    if isinstance(scenario, (str, Path, dict)):
        scenario = load_scenario(scenario)
    elif not isinstance(scenario, Scenario):
        raise UsageError(f"run({type(scenario).__name__}): expected a Scenario "
                         "(herdsim.load_scenario), a scenario file's path or a dict")
    if progress is not None and not callable(progress):
        raise UsageError(f"progress={progress!r}: expected a function progress(now, "
                         "duration) or None")
    estimate.check([scenario], force=force)
    with phase("simulate"):
        finished = simulate(scenario, progress)
    with phase("analyse: frames and summary"):
        return Result.from_finished(finished)

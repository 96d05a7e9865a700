"""What ``herdsim predict`` returns: the fluid model's time series and summary, in the
frames and keys of a run (:class:`~herdsim.results.result.Result`), marked as predicted.

The summary holds the KPIs a mean-field model can give (state, succeeded share, jobs by
outcome, calls, collapses, recovery, the short-window peak) under the same keys and
rules as a run's (recovery, state: :mod:`herdsim.analysis.summary`, read off the time
series), and says whose they are: ``predicted: fluid model``. The peak carries an
extreme-value correction for the randomised part of the traffic (:mod:`herdsim.fluid.peaks`)
and a crash threshold within reach of random bunching turns the state into ``near
threshold``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from herdsim.analysis import summary as rules
from herdsim.analysis.kpis import BY_KEY, on, show, undefined
from herdsim.analysis.kpis import predicted as predicted_kpis
from herdsim.analysis.kpis.predicted import NEAR
from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario
from herdsim.errors import UsageError
from herdsim.fluid import inputs, peaks, support
from herdsim.fluid.integrate import Flows, integrate
from herdsim.model.recorder import COUNTERS, GAUGES
from herdsim.planning import estimate
from herdsim.results.comparison import Arm, Comparison, short_name
from herdsim.results.result import Result

MARK = "fluid model"  # the summary's ``predicted``: whose numbers these are
TITLE = " — predicted (fluid model)"  # what figure titles add
FIGURES = ("timeline",)  # what a prediction draws: no jobs, no sleeps


@dataclass
class Prediction:
    """One prediction: ``timeseries`` (a run's columns, per bin, in mean amounts),
    ``peaks`` (``time``, ``peak_rate``: the busiest short window in each bin, corrected),
    ``summary`` and the ``scenario``."""

    scenario: Scenario
    timeseries: pd.DataFrame
    peaks: pd.DataFrame
    summary: dict

    def as_result(self) -> Result:
        """The prediction in a run's shape (no jobs, no sleeps: a fluid has no
        individuals), for the run's writer and figures."""
        jobs = pd.DataFrame({"job": pd.Series(dtype="int64"),
                             "arrival": pd.Series(dtype=float),
                             "finish": pd.Series(dtype=float),
                             "attempts": pd.Series(dtype="int64"),
                             "outcome": pd.Series(dtype=str)})
        sleeps = pd.DataFrame({"time": pd.Series(dtype=float),
                               "job": pd.Series(dtype="int64"),
                               "attempt": pd.Series(dtype="int64"),
                               "sleep": pd.Series(dtype=float)})
        return Result(self.scenario, self.timeseries, sleeps, jobs, self.summary,
                      np.zeros(0))

    def plot(self, kind: str = "timeline"):
        """A matplotlib Figure of this prediction (``timeline``), titled as predicted."""
        return self.comparison().plot(kind)

    def comparison(self) -> Comparison:
        """The prediction as a one-arm comparison whose figure titles say predicted."""
        return Predicted.from_outputs(self.scenario, _arms(self.scenario), 1,
                                      [self.outputs()])

    def outputs(self) -> dict:
        """What a comparison's arm holds of one run."""
        from herdsim.analysis import tiers

        return {"summary": self.summary, "timeseries": self.timeseries, "sleeps":
                self.as_result().sleeps, "peaks": self.peaks, "crashes": tiers.no_crashes()}

    def __repr__(self) -> str:
        s = self.summary
        return (f"<Prediction {self.scenario.name} ({s['strategy']}, {MARK}): {s['state']}, "
                f"{show('succeeded_fraction', s['succeeded_fraction'], s)} succeeded, "
                f"{s['collapses']} collapses, recovery "
                f"{show('recovery_time', s['recovery_time'], s)}>")

    def _repr_html_(self) -> str:
        """What ``herdsim predict`` prints, as a notebook table: run's rows (the KPI
        registry's), the predicted-only ones marked †, and the notes under them."""
        s = self.summary
        marks = dict.fromkeys(predicted_kpis.MARKED, predicted_kpis.MARK)
        rows = "".join(
            f"<tr><td>{escape(kpi.title(s) + marks.get(kpi.key, ''))}</td>"
            f"<td style='text-align:right'>{escape(kpi.show(s[kpi.key], s))}"
            f"</td><td>{escape(kpi.unit if not undefined(s[kpi.key]) else '')}</td></tr>"
            for kpi in on("run") if kpi.listed(s))
        said = "".join(f"<p>{escape(note)}</p>" for note in notes(s))
        return (f"<b>herdsim predict: {escape(self.scenario.name)} — "
                f"{escape(self.scenario.retry.strategy)} — predicted ({MARK})</b><table>"
                f"<tr><th>KPI</th><th>value</th><th>unit</th></tr>{rows}</table>{said}")


class Predicted(Comparison):
    """A one-arm comparison of a prediction: its figures' titles say so, and say when
    the state is near threshold (why, in the summary's words); it draws only
    :data:`FIGURES`."""

    drawable: ClassVar[tuple[str, ...]] = FIGURES
    predicted: ClassVar[str] = MARK

    @property
    def interrupted(self) -> str:  # the tail every figure's heading carries
        run = self.runs.iloc[0]
        near = predicted_kpis.near_text(run.get("state"), run.get("near_threshold"))
        return TITLE + (f"; {near}" if near else "")


def notes(summary: dict) -> list[str]:
    """What a predicted table's rows rest on, under it: whose values, the step, the two
    peaks (the rows marked †), and why no state is claimed when near threshold."""
    said = [f"every value predicted (the fluid model's mean amounts, step "
            f"{summary['step'] * 1000:g} ms);{predicted_kpis.MARK} the peak two ways: "
            f"{BY_KEY['peak_calls_mean'].title(summary)}: the mean flow's busiest window; "
            f"{BY_KEY['peak_calls'].title(summary)}: {predicted_kpis.BUNCHED_NOTE}"]
    near = predicted_kpis.near_text(summary.get("state"), summary.get("near_threshold"))
    return [*said, near] if near else said


def _arms(scenario: Scenario) -> list[Arm]:
    strategy = scenario.retry.strategy
    return [Arm(short_name(strategy), strategy, {}, scenario)]


def predict(scenario: Scenario | str | Path | dict, force: bool = False) -> Prediction:
    """The fluid model's :class:`Prediction` of *scenario* (a :class:`Scenario` or what
    :func:`~herdsim.load_scenario` reads). A mechanism it cannot represent is refused
    (:class:`~herdsim.errors.ScenarioError`, one line naming it), and so is a model
    beyond the work budget (:class:`~herdsim.errors.CapacityError`) unless *force*."""
    if isinstance(scenario, (str, Path, dict)):
        scenario = load_scenario(scenario)
    elif not isinstance(scenario, Scenario):
        raise UsageError(f"predict({type(scenario).__name__}): expected a Scenario, a "
                         "scenario file's path or a dict")
    support.check(scenario)
    dt = inputs.step_for(scenario)
    estimate.check_fluid(estimate.fluid(inputs.steps(scenario, dt),
                                        2 * (inputs.retries(scenario) + 1),
                                        inputs.kernel_cells(scenario, dt)), force)
    began = time.process_time()
    grid = inputs.build(scenario, dt)
    flows = integrate(scenario, grid)
    took = time.process_time() - began
    ts = timeseries(flows, scenario, grid.dt)
    peak = peaks.peak(flows.attempts, flows.randomised, scenario, grid.dt)
    frame = peaks.per_bin(flows.attempts, flows.randomised, scenario, grid.dt)
    return Prediction(scenario, ts, frame, summarize(flows, ts, scenario, grid, peak, took))


def timeseries(flows: Flows, scenario: Scenario, dt: float) -> pd.DataFrame:
    """A run's columns per bin: counters summed over the bin's steps, gauges at its
    start."""
    per_bin = int(round(scenario.bin / dt))
    n_bins = flows.attempts.size // per_bin
    columns: dict[str, np.ndarray] = {"time": np.arange(n_bins) * scenario.bin,
                                      "arrivals": np.zeros(n_bins)}
    for name in ("attempts", "success", "retry", "failed_dlq", *COUNTERS[2:]):
        values = getattr(flows, name, None)
        columns[name] = np.zeros(n_bins) if values is None else \
            values[:n_bins * per_bin].reshape(n_bins, per_bin).sum(axis=1)
    for name in GAUGES:
        values = getattr(flows, name, None)
        columns[name] = np.zeros(n_bins) if values is None else values[::per_bin][:n_bins]
    return pd.DataFrame(columns)


def summarize(flows: Flows, ts: pd.DataFrame, scenario: Scenario, grid: inputs.Grid,
              peak: peaks.Peak, took: float) -> dict:
    """The predicted KPIs, under a run's keys (see the module docstring)."""
    jobs = float(grid.jobs.sum() + scenario.workload.backlog)
    ts["arrivals"] = _binned(grid.jobs, scenario, grid.dt)
    succeeded = float(flows.success.sum())
    dead = float(flows.failed_dlq.sum())
    attempts = float(flows.attempts.sum())
    capacity = scenario.downstream.capacity_rate()
    crash_times = np.flatnonzero(flows.crashes) * grid.dt
    first = scenario.first_outage_start
    after = int((crash_times >= first).sum()) if first is not None else 0
    recovery = rules.recovery_time(ts, scenario)
    s: dict = {"scenario": scenario.name, "strategy": scenario.retry.strategy,
               "model": scenario.downstream.model, "predicted": MARK, "step": grid.dt}
    s["state"] = rules.state({"recovery_time": recovery, "collapses_after_outage": after},
                             ts, scenario)
    near = peaks.near_threshold(flows, scenario, grid.dt)
    s["near_threshold"] = near
    if near is not None and s["state"] != "metastable":  # a crash more can't lift it
        s["state"] = NEAR
    s.update(succeeded_fraction=succeeded / jobs if jobs else None,
             outages=len({repr(o) for o in scenario.all_outages}),
             jobs_submitted=jobs, jobs_succeeded=succeeded, jobs_dead_lettered=dead,
             jobs_pending=max(jobs - succeeded - dead, 0.0), attempts_total=attempts,
             retries_total=float(flows.retry.sum()),
             amplification=attempts / (succeeded + dead) if succeeded + dead else None,
             rejected_total=float(flows.rejected.sum()),
             timeouts_total=float(flows.timeouts.sum()),
             errors_total=float(flows.errors.sum()), wasted_total=float(flows.wasted.sum()),
             capacity_rate=capacity, peak_window=scenario.peak_window,
             peak_calls_mean=peak.mean, peak_calls=peak.corrected,
             peak_attempt_rate=peak.corrected / scenario.peak_window,
             peak_to_capacity=peak.corrected / scenario.peak_window / capacity,
             collapses=int(flows.crashes.sum()), collapses_after_outage=after,
             recovery_time=recovery, model_cpu_seconds=took)
    return s


def _binned(values: np.ndarray, scenario: Scenario, dt: float) -> np.ndarray:
    per_bin = int(round(scenario.bin / dt))
    n_bins = values.size // per_bin
    return values[:n_bins * per_bin].reshape(n_bins, per_bin).sum(axis=1)

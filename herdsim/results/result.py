"""What a run returns: pandas frames and a summary, from memory (saving lives in outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from herdsim.analysis.summary import summarize
from herdsim.config.scenario import Scenario
from herdsim.model.finished import Finished
from herdsim.model.simulation import Progress, simulate


@dataclass
class Result:
    """One run: ``timeseries`` (one row per bin), ``sleeps`` (every retry sleep drawn),
    ``jobs`` (one row per job), ``summary`` (the KPIs) and the resolved ``scenario``."""

    scenario: Scenario
    timeseries: pd.DataFrame
    sleeps: pd.DataFrame
    jobs: pd.DataFrame
    summary: dict
    attempt_times: np.ndarray = field(repr=False)
    crash_times: list[float] = field(default_factory=list)

    @classmethod
    def from_finished(cls, run: Finished) -> Result:
        """Turn a model's raw record into frames and KPIs."""
        rec, scenario = run.recorder, run.scenario
        ts = rec.timeseries(scenario.bin, run.n_bins)
        jobs = rec.jobs(run.pending)
        attempts = np.asarray(rec.attempts, dtype=float)
        summary = summarize(ts, jobs, attempts, rec.crashes, scenario, run.wall,
                            run.breaker_trips, run.breaker_open_time)
        summary.update(run.extra)
        return cls(scenario, ts, rec.sleeps(), jobs, summary, attempts, list(rec.crashes))

    def plot(self, kind: str = "timeline"):
        """A matplotlib Figure of this run (see :meth:`Comparison.plot`)."""
        from herdsim.results.comparison import Comparison

        return Comparison.from_result(self).plot(kind)

    def _repr_html_(self) -> str:
        table = pd.Series(self.summary, name="value").to_frame()._repr_html_()
        return f"<b>herdsim run: {self.scenario.name}</b>{table}"


def run(scenario: Scenario, progress: Progress | None = None) -> Result:
    """Run *scenario* once and return its :class:`Result`.

    *progress*, if given, is called as ``progress(now, duration)`` (simulated seconds
    done, of the run's total) about 200 times during the run and once at its end.
    """
    return Result.from_finished(simulate(scenario, progress))

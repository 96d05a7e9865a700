"""What a run returns: pandas frames, a summary, and a way to save them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .analysis import summarize
from .outputs import staged_dir
from .scenario import Scenario

OUTPUT_FILES = ("timeseries.csv", "sleeps.csv", "jobs.parquet", "summary.json", "scenario.yaml")


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
    def from_simulation(cls, sim, wall: float) -> Result:
        rec = sim.recorder
        scenario = sim.scenario
        ts = rec.timeseries(scenario.bin, sim.n_bins)
        jobs = rec.jobs(sim.pending_jobs())
        attempts = np.asarray(rec.attempts, dtype=float)
        gates = sim.gates
        open_time = (sim.breaker_stats.total_open(gates, scenario.duration) / len(gates)
                     if gates else 0.0)
        summary = summarize(ts, jobs, attempts, rec.crashes, scenario, wall,
                            sum(g.breaker.trips for g in gates), open_time)
        return cls(scenario, ts, rec.sleeps(), jobs, summary, attempts, list(rec.crashes))

    def save(self, out: str | Path) -> Path:
        """Write every output file into the new directory *out* (atomically)."""
        with staged_dir(out) as staging:
            staging.mkdir()
            self.timeseries.to_csv(staging / "timeseries.csv", index=False)
            self.sleeps.to_csv(staging / "sleeps.csv", index=False)
            self.jobs.to_parquet(staging / "jobs.parquet", index=False)
            (staging / "summary.json").write_text(json.dumps(self.summary, indent=2) + "\n")
            (staging / "scenario.yaml").write_text(self.scenario.to_yaml())
        return Path(out)

    def _repr_html_(self) -> str:
        table = pd.Series(self.summary, name="value").to_frame()._repr_html_()
        return f"<b>herdsim run: {self.scenario.name}</b>{table}"

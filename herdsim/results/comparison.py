"""Arms of one scenario side by side, in memory: the frames, the summary and the ranking.

An *arm* is the base scenario with one retry strategy and one value of every varied key.
Frames are tidy, with ``arm`` and ``replication`` columns; ``summary`` has one row per arm:
``arm``, ``strategy``, one column per varied key, ``replications``, then every numeric KPI
as its mean over replications and ``<kpi>_ci95``, the half-width of its 95% Student-t
confidence interval (empty with one replication). A KPI undefined in any replication
(``recovery_time`` of a run that never recovers) has an empty mean.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis.kpis import COMPARE_TABLE, format_kpi
from herdsim.analysis.rates import peak_rate_series
from herdsim.analysis.statistics import ci95
from herdsim.config.scenario import Scenario, load_scenario
from herdsim.plots import figures


@dataclass
class Arm:
    """One arm: the base scenario with ``strategy`` and ``settings`` (varied key -> value)."""

    label: str
    strategy: str
    settings: dict[str, Any]
    scenario: Scenario = field(repr=False)


def value_text(value: Any) -> str:
    """A setting as a scenario file writes it (``None`` -> ``null``, ``True`` -> ``true``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def short_name(strategy: str) -> str:
    """``package.module:Class`` -> ``Class``; a registered name stays as it is."""
    return strategy.rpartition(":")[2]


def arm_scenario(base: Scenario, strategy: str, settings: dict[str, Any],
                 check_strategy: bool = True) -> Scenario:
    """The scenario of one arm: *base* with *strategy* and *settings* applied, validated."""
    overrides = {**settings, "retry.strategy": strategy}
    if check_strategy:
        return load_scenario(base.to_dict(), overrides)
    # A saved comparison may name a strategy importable only where it ran (a notebook):
    # validate everything else and keep the name as it is.
    scenario = load_scenario(base.to_dict(), settings)
    retry = scenario.retry.model_copy(update={"strategy": strategy})
    return scenario.model_copy(update={"retry": retry})


def peak_rate_frame(result) -> pd.DataFrame:
    """``time``, ``peak_rate`` of one run (see :func:`peak_rate_series`)."""
    sc = result.scenario
    times = result.timeseries["time"].to_numpy()
    peaks = peak_rate_series(result.attempt_times, sc.peak_window, sc.bin, len(times))
    return pd.DataFrame({"time": times, "peak_rate": peaks})


def aggregate(runs: pd.DataFrame, arms: list[Arm]) -> pd.DataFrame:
    """One row per arm: mean and 95% CI half-width of every numeric KPI in *runs*."""
    skip = {"arm", "replication", "seed", *(key for arm in arms for key in arm.settings)}
    kpis = [c for c in runs.columns if c not in skip and _numeric(runs[c])]
    rows = []
    for arm in arms:
        values = runs.loc[runs["arm"] == arm.label, kpis].apply(pd.to_numeric).astype(float)
        n = len(values)
        row: dict[str, Any] = {"arm": arm.label, "strategy": arm.strategy, **arm.settings,
                               "replications": n}
        for kpi in kpis:
            column = values[kpi]
            row[kpi] = column.mean(skipna=False)
            row[f"{kpi}_ci95"] = ci95(column.to_numpy())
        rows.append(row)
    return pd.DataFrame(rows)


def _numeric(column: pd.Series) -> bool:
    """Numbers, possibly missing (a KPI undefined in every run is still a KPI)."""
    if pd.api.types.is_bool_dtype(column):
        return False
    present = column.dropna()
    return bool(present.map(lambda v: isinstance(v, (int, float, np.number))
                            and not isinstance(v, (bool, np.bool_))).all())


def rank(summary: pd.DataFrame) -> pd.DataFrame:
    """Arms best first: recovered before never-recovered, then by recovery time, then by
    peak over capacity."""
    order = summary.assign(_never=summary["recovery_time"].isna())
    order = order.sort_values(["_never", "recovery_time", "peak_to_capacity"], kind="stable")
    return order.drop(columns="_never").reset_index(drop=True)


@dataclass
class Comparison:
    """Arms of one scenario run side by side. Frames are tidy, with ``arm`` (and
    ``replication``) columns; ``summary`` has one row per arm (see the module docstring)."""

    scenario: Scenario
    arms: list[Arm]
    replications: int
    runs: pd.DataFrame
    timeseries: pd.DataFrame
    sleeps: pd.DataFrame
    peaks: pd.DataFrame | None
    summary: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        self.summary = aggregate(self.runs, self.arms)

    @classmethod
    def from_outputs(cls, base: Scenario, arms: list[Arm], replications: int,
                     outputs: list[dict[str, Any]]) -> Comparison:
        """Assemble the per-run outputs of :func:`compare` (in arm-major task order)."""
        keys = list(itertools.product(arms, range(replications)))

        def tidy(name: str) -> pd.DataFrame:
            frames = [out[name].assign(arm=arm.label, replication=r)
                      for (arm, r), out in zip(keys, outputs, strict=True)]
            frame = pd.concat(frames, ignore_index=True)
            return frame[["arm", "replication", *frames[0].columns[:-2]]]

        runs = pd.DataFrame([{"arm": arm.label, "replication": r, **arm.settings,
                              **out["summary"]}
                             for (arm, r), out in zip(keys, outputs, strict=True)])
        return cls(base, arms, replications, runs, tidy("timeseries"), tidy("sleeps"),
                   tidy("peaks"))

    @property
    def varied(self) -> str:
        """What differs between arms, in words: ``retry strategy x breaker.enabled``."""
        parts = []
        if len({arm.strategy for arm in self.arms}) > 1:
            parts.append("retry strategy")
        parts += list(self.arms[0].settings)
        return " x ".join(parts) or f"one arm ({self.arms[0].label})"

    def arm(self, label: str) -> Arm:
        return next(arm for arm in self.arms if arm.label == label)

    def ranked(self) -> pd.DataFrame:
        """The summary, best arm first (see :func:`rank`)."""
        return rank(self.summary)

    def table(self) -> pd.DataFrame:
        """The ranked summary as display strings: arm, then mean ± 95% CI of key KPIs."""
        ranked = self.ranked()
        columns = {"arm": ranked["arm"].tolist()}
        for key, heading in COMPARE_TABLE.items():
            ci = ranked.get(f"{key}_ci95", pd.Series(np.nan, index=ranked.index))
            columns[heading] = [format_kpi(m, c, self.missing(key))
                                for m, c in zip(ranked[key], ci, strict=True)]
        return pd.DataFrame(columns, index=pd.RangeIndex(1, len(ranked) + 1, name="rank"))

    def missing(self, key: str) -> str:
        """How to show KPI *key* when undefined: ``never`` for a recovery after an outage."""
        outage = bool(self.scenario.downstream.outages)
        return "never" if key == "recovery_time" and outage else "—"

    def plot(self, kind: str = "timeline"):
        """A matplotlib Figure: ``timeline``, ``sleeps`` or ``kpis``."""
        return figures.draw(self, kind)

    @classmethod
    def from_result(cls, result) -> Comparison:
        """A single :class:`~herdsim.results.result.Result` as a one-arm comparison."""
        strategy = result.scenario.retry.strategy
        arm = Arm(short_name(strategy), strategy, {}, result.scenario)
        output = {"summary": result.summary, "timeseries": result.timeseries,
                  "sleeps": result.sleeps, "peaks": peak_rate_frame(result)}
        return cls.from_outputs(result.scenario, [arm], 1, [output])

    def __repr__(self) -> str:
        return (f"<Comparison {self.scenario.name}: {len(self.arms)} arms varying "
                f"{self.varied}, {self.replications} replication(s) each>")

    def _repr_html_(self) -> str:
        return (f"<b>herdsim comparison: {self.scenario.name}</b> — {len(self.arms)} arms "
                f"varying {self.varied}, replications per arm: {self.replications}; "
                f"best first" + self.table().to_html(index_names=False))

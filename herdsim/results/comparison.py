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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from herdsim.analysis import tiers
from herdsim.analysis.kpis import (
    BY_KEY,
    KPI,
    REGISTRY,
    TIER_BY_KEY,
    kpi_of,
    on,
    rank,
    window_text,
)
from herdsim.analysis.metastability import RANK_RULE, majority
from herdsim.analysis.rates import peak_rate_series
from herdsim.analysis.statistics import ci95
from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario
from herdsim.model.cache import COUNTERS as CACHE_COUNTERS
from herdsim.model.downstream.fleet import COUNTERS as FLEET_COUNTERS
from herdsim.model.recorder import BY_MECHANISM
from herdsim.plots import figures


@dataclass
class Arm:
    """One arm: the base scenario with ``strategy`` and ``settings`` (varied key -> value)."""

    label: str
    strategy: str
    settings: dict[str, Any]
    scenario: Scenario = field(repr=False)


def short_name(strategy: str) -> str:
    """``package.module:Class`` -> ``Class``; a registered name stays as it is."""
    return strategy.rpartition(":")[2]


def arm_scenario(base: Scenario, strategy: str, settings: dict[str, Any],
                 check_strategy: bool = True) -> Scenario:
    """The scenario of one arm: *base* with *strategy* and *settings* applied, validated."""
    overrides = {**settings, "retry.strategy": strategy}
    # A saved comparison is read without importing the code it names (a notebook's
    # strategy may not even be importable here): with check_strategy=False an import path
    # stays a name.
    return load_scenario(base.to_dict(), overrides, trust_code=check_strategy)


def peak_rate_frame(result) -> pd.DataFrame:
    """``time``, ``peak_rate`` of one run (see :func:`peak_rate_series`)."""
    sc = result.scenario
    times = result.timeseries["time"].to_numpy()
    peaks = peak_rate_series(result.attempt_times, sc.peak_window, sc.bin, len(times))
    return pd.DataFrame({"time": times, "peak_rate": peaks})


# a KPI's ``across`` -> how its replications make one arm's value
COMBINE: dict[str, Callable[[pd.Series], Any]] = {
    "majority": majority,  # the class of most replications, ties to the worse
    "mode": lambda values: Counter(values).most_common(1)[0][0],
    "any": lambda values: bool(values.astype(bool).any()),
}


def aggregate(runs: pd.DataFrame, arms: list[Arm]) -> pd.DataFrame:
    """One row per arm: each KPI whose replications combine otherwise than by their mean
    (its ``across``: ``state`` and a call graph's ``tiers.<tier>.state`` the class of
    most replications, ties to the worse; ``headline_tier`` the tier most replications
    headline; ``latency_censored`` in any replication), and the mean of every numeric
    KPI in *runs*, with ``<kpi>_ci95`` only when arms have two replications or more.
    Counts stay whole numbers (``Int64``) when every mean is one (always with one
    replication)."""
    identity = {kpi.key for kpi in REGISTRY if kpi.across is None}  # the run's, not a KPI's
    skip = {"arm", "replication", *identity, *(key for arm in arms for key in arm.settings)}
    kpis = [c for c in runs.columns if c not in skip and _numeric(runs[c])]
    combined = {kpi.key: rule for kpi in REGISTRY
                if kpi.key in runs and (rule := _combine(kpi)) is not None}
    tiered = {c: rule for c in runs.columns
              if c.startswith("tiers.") and (rule := _combine(_of(c))) is not None}
    spread = runs.groupby("arm").size().max() > 1 if len(runs) else False
    rows = []
    for arm in arms:
        mine = runs.loc[runs["arm"] == arm.label]
        values = mine[kpis].apply(pd.to_numeric).astype(float)
        row: dict[str, Any] = {"arm": arm.label, "strategy": arm.strategy, **arm.settings,
                               "replications": len(values)}
        for key, rule in combined.items():
            row[key] = rule(mine[key])
        for column in runs.columns:
            if column in tiered:
                row[column] = tiered[column](mine[column])
            elif column in kpis:
                row[column] = values[column].mean(skipna=False)
                if spread:
                    row[f"{column}_ci95"] = ci95(values[column].to_numpy())
        rows.append(row)
    summary = pd.DataFrame(rows)
    for kpi in kpis:
        whole = summary[kpi].dropna()
        if kind(kpi) == "count" and (whole % 1 == 0).all():
            summary[kpi] = summary[kpi].astype("Int64")
    return summary


def _combine(kpi: KPI | None) -> Callable[[pd.Series], Any] | None:
    """How *kpi*'s replications make one value, unless by their mean (:data:`COMBINE`)."""
    return None if kpi is None else COMBINE.get(kpi.across or "")


def _of(column: str) -> KPI | None:
    """The KPI of a summary column: a run KPI's, or a tier KPI's for
    ``tiers.<tier>.<key>``; None for any other column."""
    if column.startswith("tiers."):
        return TIER_BY_KEY.get(column.rpartition(".")[2])
    return BY_KEY.get(column)


def kind(column: str) -> str | None:
    """The registry's kind of a summary column (see :func:`_of`); None for any other."""
    found = _of(column)
    return None if found is None else found.kind


def _numeric(column: pd.Series) -> bool:
    """Numbers, possibly missing (a KPI undefined in every run is still a KPI)."""
    if pd.api.types.is_bool_dtype(column):
        return False
    present = column.dropna()
    return bool(present.map(lambda v: isinstance(v, (int, float, np.number))
                            and not isinstance(v, (bool, np.bool_))).all())


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
    unfinished: list[str] = field(default_factory=list)  # arms an interruption left out
    crashes: pd.DataFrame | None = None  # a call graph's: arm, replication, tier, time
    summary: pd.DataFrame = field(init=False)
    drawable: ClassVar[tuple[str, ...]] = figures.FIGURES  # the figure kinds it can draw
    predicted: ClassVar[str] = ""  # whose numbers, when no simulation's ("fluid model")

    def __post_init__(self) -> None:
        self.summary = aggregate(self.runs, self.arms)

    @classmethod
    def from_outputs(cls, base: Scenario, arms: list[Arm], replications: int,
                     outputs: list[dict[str, Any]]) -> Comparison:
        """Assemble the per-run outputs of :func:`compare` (in arm-major task order)."""
        keys = list(itertools.product(arms, range(replications)))

        def tidy(name: str) -> pd.DataFrame:
            """The arms' frames stacked: every arm's columns (a defence or a cache's
            option only some arms have: its counters 0 where it is absent, its gauges
            empty)."""
            frames = [out[name].assign(arm=arm.label, replication=r)
                      for (arm, r), out in zip(keys, outputs, strict=True)]
            frame = pd.concat(frames, ignore_index=True)
            for counter in (c for c in frame if (c.endswith(BY_MECHANISM)  # a service's too
                                                      or c.endswith(CACHE_COUNTERS)
                                                      or c.endswith(FLEET_COUNTERS))
                            and frame[c].isna().any()):
                frame[counter] = frame[counter].fillna(0).astype(np.int64)
            columns = dict.fromkeys(c for f in frames for c in f.columns[:-2])
            return frame[["arm", "replication", *columns]]

        runs = pd.DataFrame([{"arm": arm.label, "replication": r, **arm.settings,
                              **tiers.flat(out["summary"])}
                             for (arm, r), out in zip(keys, outputs, strict=True)])
        crashes = tidy("crashes") if all("crashes" in out for out in outputs) else None
        return cls(base, arms, replications, runs, tidy("timeseries"), tidy("sleeps"),
                   tidy("peaks"), crashes=crashes)

    @property
    def interrupted(self) -> str:
        """``""``, or what an interruption left out: ``; interrupted: 2 arms not run
        (celery, sidekiq)``, for titles."""
        if not self.unfinished:
            return ""
        n = len(self.unfinished)
        return (f"; interrupted: {n} arm{'s' * (n > 1)} not run "
                f"({', '.join(self.unfinished)})")

    @property
    def varied(self) -> str:
        """What differs between arms, in words: ``retry strategy x breaker.enabled``, or
        ``retry preset`` for arms of ``--presets``."""
        parts = []
        presets = {arm.settings.get("retry.preset") for arm in self.arms}
        if len(presets) > 1:
            parts.append("retry preset")
        elif len({arm.strategy for arm in self.arms}) > 1:
            parts.append("retry strategy")
        parts += [key for key in self.arms[0].settings if key != "retry.preset"]
        return " x ".join(parts) or f"one arm ({self.arms[0].label})"

    def arm(self, label: str) -> Arm:
        return next(arm for arm in self.arms if arm.label == label)

    def ranked(self) -> pd.DataFrame:
        """The summary, best arm first (see :func:`rank`)."""
        return rank(self.summary)

    def columns(self) -> dict[str, str]:
        """KPI key -> heading of the ranked table's columns: the KPIs with a ``compare``
        panel the summary holds, in its order; one shown only when nonzero (a defence's
        counter: sheds, refused retries) only when it is in some arm."""
        summary = self.summary
        return {kpi.key: kpi.panels["compare"].heading for kpi in on("compare")
                if kpi.key in summary and (not kpi.panels["compare"].nonzero
                                           or (summary[kpi.key].fillna(0) != 0).any())}

    def table(self) -> pd.DataFrame:
        """The ranked summary as display strings: arm, then :meth:`columns` (mean, ±
        95% CI with two replications or more; ``≥`` on lower bounds)."""
        ranked = self.ranked()
        columns = {"arm": ranked["arm"].tolist()}
        for key, heading in self.columns().items():
            ci = ranked.get(f"{key}_ci95", pd.Series(np.nan, index=ranked.index))
            columns[self.heading(heading)] = [self.shown(key, row, c) for (_, row), c
                                              in zip(ranked.iterrows(), ci, strict=True)]
        return pd.DataFrame(columns, index=pd.RangeIndex(1, len(ranked) + 1, name="rank"))

    def heading(self, text: str) -> str:
        """A column heading of :meth:`columns` with the peak window filled in."""
        return text.replace("{window}", window_text({"peak_window": self.scenario.peak_window}))

    def shown(self, key: str, row: pd.Series, ci: float = np.nan) -> str:
        """KPI *key* of an arm's summary *row* as every surface shows it (± *ci*);
        a value some replications did not reach (a recovery) says in how many."""
        kpi = kpi_of(key)
        context = self.context(row)
        if kpi.unreached and pd.isna(row[key]) and kpi.applies(context):
            runs = self.runs.loc[self.runs["arm"] == row["arm"], key]
            stuck = int(runs.isna().sum())
            if stuck < len(runs):
                return f"{kpi.unreached} in {stuck} of {len(runs)} runs"
        return kpi.show(row[key], context, ci)

    def context(self, row: pd.Series | None = None) -> dict:
        """What :func:`~herdsim.analysis.kpis.show` needs to know about an arm's row: its
        KPIs (the latency bounds among them), the scenario's outages and model."""
        context = {} if row is None else row.to_dict()
        context.update(outages=len(self.scenario.all_outages),
                       model=self.scenario.downstream.model)
        return context

    def missing(self, key: str) -> str:
        """How to show KPI *key* when undefined: ``not recovered within the run`` for a
        recovery after an outage, ``n/a (why)`` otherwise."""
        return kpi_of(key).missing_text(self.context())

    def plot(self, kind: str = "timeline"):
        """A matplotlib Figure: ``timeline``, ``sleeps`` or ``kpis``."""
        return figures.draw(self, kind)

    @classmethod
    def from_result(cls, result) -> Comparison:
        """A single :class:`~herdsim.results.result.Result` as a one-arm comparison."""
        strategy = result.scenario.retry.strategy
        arm = Arm(short_name(strategy), strategy, {}, result.scenario)
        output = {"summary": result.summary, "timeseries": result.timeseries,
                  "sleeps": result.sleeps, "peaks": peak_rate_frame(result),
                  "crashes": result.tier_crashes}
        return cls.from_outputs(result.scenario, [arm], 1, [output])

    def tidy(self) -> pd.DataFrame:
        """The summary in long form: one row per arm and KPI with ``arm``, ``rank``,
        ``kpi``, ``label``, ``unit``, ``value`` (the mean; None when undefined), ``ci95``
        (None with one replication), ``shown`` (as the tables show it) and ``better``."""
        ranked = self.ranked()
        rows = []
        for rank_number, (_, row) in enumerate(ranked.iterrows(), start=1):
            for kpi in (k for k in REGISTRY if k.key in row.index and k.across is not None):
                key = kpi.key
                ci = row.get(f"{key}_ci95")
                rows.append({"arm": row["arm"], "rank": rank_number, "kpi": key,
                             "label": kpi.title(self.context(row)), "unit": kpi.unit,
                             "value": _plain(row[key]), "ci95": _plain(ci),
                             "shown": self.shown(key, row, np.nan if ci is None else ci),
                             "better": kpi.better})
        return pd.DataFrame(rows)

    def to_json(self) -> dict[str, Any]:
        """The ranked summary as plain data (``herdsim compare --json``): scenario,
        what varies, replications, the ranking rule, and one record per arm, best first
        (undefined KPIs as None, counts as ints)."""
        ranked = self.ranked()
        arms = [{"rank": i, **{key: _plain(value) for key, value in row.items()}}
                for i, (_, row) in enumerate(ranked.iterrows(), start=1)]
        return {"scenario": self.scenario.name, "varied": self.varied,
                "replications": self.replications, "ranked_by": RANK_RULE, "arms": arms}

    def __repr__(self) -> str:
        best = self.ranked().iloc[0]
        return (f"<Comparison {self.scenario.name}: {len(self.arms)} arms varying "
                f"{self.varied}, {self.replications} replication(s) each; best: "
                f"{best['arm']} ({best.get('state', '?')}){self.interrupted}>")

    def _repr_html_(self) -> str:
        table = self.table()
        units = {self.heading(heading): BY_KEY[key].unit
                 for key, heading in self.columns().items()
                 if self.heading(heading) in table and BY_KEY[key].unit
                 and BY_KEY[key].kind != "fraction"}
        table.columns = [f"{c} ({units[c]})" if c in units and units[c] not in c else c
                         for c in table.columns]
        note = ("one replication: small differences may be noise" if self.replications == 1
                else "± = 95% confidence interval")
        return (f"<b>herdsim comparison: {escape(self.scenario.name)}</b> — {len(self.arms)} "
                f"arms varying {escape(self.varied)}, {self.replications} replication(s) "
                f"each; {escape(RANK_RULE)}; {note}"
                + table.to_html(index_names=False))


def _plain(value: Any) -> Any:
    """A frame cell as plain Python: NaN and NA -> None, numpy scalars -> int/float/bool."""
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
        return None
    item = getattr(value, "item", None)
    return item() if callable(item) else value

"""Compare arms of one scenario (strategies x varied settings) with common random numbers.

An *arm* is the base scenario with one retry strategy and one value of every varied key
(the cartesian product). Replication ``r`` of every arm runs with seed ``scenario.seed + r``,
so arms differ only by what was varied (common random numbers): replication 0 of an arm
is exactly ``herdsim.run`` of that arm's scenario.

Output layout of :meth:`Comparison.save` (``herdsim compare --out DIR``):

- ``summary.csv``: one row per arm (``arm``, ``strategy``, one column per varied key,
  ``replications``), then every numeric KPI as its mean over replications and
  ``<kpi>_ci95``, the half-width of its 95% Student-t confidence interval (empty with one
  replication). A KPI undefined in any replication (``recovery_time`` of a run that never
  recovers) has an empty mean.
- ``runs.csv``: one row per arm and replication, the raw summary of each run.
- ``timeseries.csv``: tidy, ``arm``, ``replication``, then the run's time-series columns.
- ``peak_rate.csv``: ``arm``, ``replication``, ``time``, ``peak_rate``: downstream calls
  per second in the busiest ``peak_window`` starting within each bin (what the timeline
  plots; its maximum is the summary's ``peak_attempt_rate``).
- ``sleeps.csv``: ``arm``, ``replication``, then every retry sleep (time, job, attempt, sleep).
- ``scenario.yaml``: the base scenario; ``arms.json``: each arm's label, strategy and
  settings, and the number of replications.
- ``timeline``, ``sleeps``, ``kpis`` figures (``.png`` and ``.svg``, or ``.pdf``);
  ``report.html`` when asked for.

A run directory (``herdsim run --out DIR``) holds the files of :meth:`Result.save` plus
``peak_rate.csv`` (without ``arm``/``replication``) and ``timeline.png``;
:func:`load_outputs` reads either kind into a :class:`Comparison`.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import rich

from . import strategies as strategy_registry
from .errors import ScenarioError
from .outputs import staged_dir
from .parallel import imap_unordered
from .result import Result
from .scenario import Scenario, load_scenario
from .simulation import run

FORMATS = ("png", "svg", "pdf")
FIGURES = ("timeline", "sleeps", "kpis")
RUN_MARKER = "summary.json"
COMPARE_MARKER = "arms.json"


TABLE_KPIS = (  # (summary key, column heading) of the ranked table
    ("peak_to_capacity", "peak/cap ×"),
    ("amplification", "calls/job"),
    ("recovery_time", "recovery s"),
    ("jobs_succeeded", "succeeded"),
    ("jobs_dead_lettered", "DLQ"),
    ("jobs_pending", "pending"),
    ("collapses_after_outage", "crashes after"),
    ("latency_p99", "p99 s"),
)


class OutputDirError(ValueError):
    """A directory that holds no herdsim run or comparison."""


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


def _arm_scenario(base: Scenario, strategy: str, settings: dict[str, Any],
                  check_strategy: bool = True) -> Scenario:
    overrides = {**settings, "retry.strategy": strategy}
    if check_strategy:
        return load_scenario(base.to_dict(), overrides)
    # A saved comparison may name a strategy importable only where it ran (a notebook):
    # validate everything else and keep the name as it is.
    scenario = load_scenario(base.to_dict(), settings)
    retry = scenario.retry.model_copy(update={"strategy": strategy})
    return scenario.model_copy(update={"retry": retry})


def _label(strategy: str, settings: dict[str, Any]) -> str:
    varied = ", ".join(f"{key}={value_text(value)}" for key, value in settings.items())
    return f"{short_name(strategy)}, {varied}" if varied else short_name(strategy)


def build_arms(scenario: Scenario, strategies: Sequence[str] | None = None,
               vary: dict[str, Sequence[Any]] | None = None) -> list[Arm]:
    """Every arm: each strategy x each combination of varied values, validated up front.

    Raises :class:`ScenarioError` naming the offending strategy or setting.
    """
    names = list(strategies) if strategies else list(strategy_registry.BUILT_IN)
    vary = dict(vary or {})
    if "retry.strategy" in vary:
        raise ScenarioError([("retry.strategy", "not a vary key: list the strategies to "
                              "compare with --strategies (strategies=[...] in Python)")],
                            "vary")
    if len(set(names)) != len(names):
        raise ScenarioError([("", f"a strategy is listed twice: {', '.join(names)}")],
                            "strategies")
    for key, values in vary.items():
        if isinstance(values, (str, bytes)) or not values:
            raise ScenarioError([(key, "expected a non-empty list of values")], "vary")
        texts = [value_text(v) for v in values]
        if len(set(texts)) != len(texts):
            raise ScenarioError([(key, f"a value is listed twice: {', '.join(texts)}")], "vary")
    arms = []
    for name in names:
        for combo in itertools.product(*vary.values()):
            settings = dict(zip(vary, combo, strict=True))
            try:
                arm_scenario = _arm_scenario(scenario, name, settings)
            except ScenarioError as exc:
                source = "strategies" if exc.problems[0][0].startswith("retry") else "vary"
                raise ScenarioError(exc.problems, source) from None
            arms.append(Arm(_label(name, settings), name, settings, arm_scenario))
    return arms


def peak_rate_series(times: np.ndarray, window: float, bin_width: float,
                     n_bins: int) -> np.ndarray:
    """Per bin: events per second in the busiest *window* starting within the bin.

    *times* must be sorted. The maximum over bins is ``analysis.peak_rate(times, window)``.
    """
    times = np.asarray(times, dtype=float)
    out = np.zeros(n_bins)
    if times.size == 0:
        return out
    rate = (np.searchsorted(times, times + window, side="left") - np.arange(times.size)) / window
    index = np.clip((times / bin_width).astype(np.int64), 0, n_bins - 1)
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    out[index[starts]] = np.maximum.reduceat(rate, starts)
    return out


def peak_rate_frame(result: Result) -> pd.DataFrame:
    """``time``, ``peak_rate`` of one run (see :func:`peak_rate_series`)."""
    sc = result.scenario
    times = result.timeseries["time"].to_numpy()
    peaks = peak_rate_series(result.attempt_times, sc.peak_window, sc.bin, len(times))
    return pd.DataFrame({"time": times, "peak_rate": peaks})


def _simulate(task: tuple[Scenario, int]) -> dict[str, Any]:
    """Run one (arm, replication) in a worker process; return only what a comparison keeps."""
    scenario, replication = task
    seeded = scenario.model_copy(update={"seed": scenario.seed + replication})
    result = run(seeded)
    return {
        "summary": result.summary,
        "timeseries": result.timeseries,
        "sleeps": result.sleeps,
        "peaks": peak_rate_frame(result),
    }


def _runs_in_main_only(arms: list[Arm]) -> bool:
    """True when a strategy lives in ``__main__`` (a notebook cell): workers cannot import it."""
    return any(arm.strategy.startswith("__main__:") for arm in arms)


def compare(scenario: Scenario | str | Path, strategies: Sequence[str] | None = None,
            vary: dict[str, Sequence[Any]] | None = None, replications: int = 1,
            processes: int | None = None, progress: bool | None = None) -> Comparison:
    """Run every arm of *scenario* ``replications`` times and line them up.

    *strategies* defaults to every built-in; *vary* maps dotted scenario keys to the values
    to try. Runs go to ``processes`` local processes (default: all cores); strategies
    defined in ``__main__`` (a notebook) run in this process. ``progress`` shows a rich
    progress bar (default: in a terminal, not in Jupyter, where rich needs ipywidgets).
    A bad strategy or setting raises :class:`ScenarioError` before anything runs.
    """
    base = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if replications < 1:
        raise ScenarioError([("", f"must be at least 1, got {replications}")], "replications")
    arms = build_arms(base, strategies, vary)
    tasks = [(arm.scenario, r) for arm in arms for r in range(replications)]
    if _runs_in_main_only(arms):
        processes = 1
    if progress is None:
        progress = not rich.get_console().is_jupyter
    label = f"{base.name}: {len(arms)} arms x {replications}" if progress else None
    outputs: list[dict[str, Any]] = [{}] * len(tasks)
    for index, output in imap_unordered(_simulate, tasks, processes, label):
        outputs[index] = output
    return Comparison.from_outputs(base, arms, replications, outputs)


def aggregate(runs: pd.DataFrame, arms: list[Arm]) -> pd.DataFrame:
    """One row per arm: mean and 95% CI half-width of every numeric KPI in *runs*."""
    from scipy import stats  # slow to import: only when aggregating

    skip = {"arm", "replication", "seed", *(key for arm in arms for key in arm.settings)}
    kpis = [c for c in runs.columns if c not in skip and _numeric(runs[c])]
    rows = []
    for arm in arms:
        values = runs.loc[runs["arm"] == arm.label, kpis].apply(pd.to_numeric).astype(float)
        n = len(values)
        row: dict[str, Any] = {"arm": arm.label, "strategy": arm.strategy, **arm.settings,
                               "replications": n}
        t = stats.t.ppf(0.975, n - 1) if n > 1 else np.nan
        for kpi in kpis:
            column = values[kpi]
            row[kpi] = column.mean(skipna=False)
            row[f"{kpi}_ci95"] = t * column.std(ddof=1) / np.sqrt(n) if n > 1 else np.nan
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


def format_kpi(mean: float, ci: float = np.nan, missing: str = "—") -> str:
    """A KPI for a table: ``14.7``, ``14.7 ±0.31``, or *missing* when undefined."""
    if pd.isna(mean):
        return missing

    def text(value: float) -> str:
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"

    return text(mean) if pd.isna(ci) else f"{text(mean)} ±{text(ci)}"


def save_figures(comparison: Comparison, directory: Path, formats: Sequence[str],
                 kinds: Sequence[str] = FIGURES) -> list[Path]:
    """Draw figures *kinds* of *comparison* into *directory*, once per format."""
    from . import plots

    written = []
    for kind in kinds:
        figure = plots.draw(comparison, kind)
        for fmt in formats:
            path = directory / f"{kind}.{fmt}"
            figure.savefig(path, format=fmt)
            written.append(path)
    return written


def redraw(directory: str | Path, formats: Sequence[str]) -> list[Path]:
    """Redraw every figure of a run or comparison *directory* from its saved outputs;
    each file is replaced whole (drawn aside, then renamed over the old one)."""
    directory = Path(directory)
    comparison = load_outputs(directory)
    with tempfile.TemporaryDirectory(prefix=".redraw-", dir=directory) as aside:
        drawn = save_figures(comparison, Path(aside), formats)
        return [path.replace(directory / path.name) for path in drawn]


def save_run(result: Result, out: str | Path) -> Path:
    """Save a single run like :meth:`Result.save`, plus ``peak_rate.csv`` and
    ``timeline.png``; *out* appears only once everything is written."""
    with staged_dir(out) as staging:
        result.save(staging)
        peak_rate_frame(result).to_csv(staging / "peak_rate.csv", index=False)
        save_figures(load_outputs(staging), staging, ["png"], ["timeline"])
    return Path(out)


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
        for key, heading in TABLE_KPIS:
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
        from . import plots

        return plots.draw(self, kind)

    def save(self, out: str | Path, formats: Sequence[str] = ("png", "svg"),
             report: bool = False) -> Path:
        """Write the layout of the module docstring into the new directory *out*."""
        with staged_dir(out) as staging:
            staging.mkdir()
            self.summary.to_csv(staging / "summary.csv", index=False)
            self.runs.to_csv(staging / "runs.csv", index=False)
            self.timeseries.to_csv(staging / "timeseries.csv", index=False)
            if self.peaks is not None:
                self.peaks.to_csv(staging / "peak_rate.csv", index=False)
            self.sleeps.to_csv(staging / "sleeps.csv", index=False)
            (staging / "scenario.yaml").write_text(self.scenario.to_yaml())
            arms = [{"label": a.label, "strategy": a.strategy, "settings": a.settings}
                    for a in self.arms]
            meta = {"replications": self.replications, "arms": arms}
            (staging / COMPARE_MARKER).write_text(json.dumps(meta, indent=2) + "\n")
            save_figures(self, staging, formats)
            if report:
                from .report import write_report

                write_report(staging, self)
        return Path(out)

    def __repr__(self) -> str:
        return (f"<Comparison {self.scenario.name}: {len(self.arms)} arms varying "
                f"{self.varied}, {self.replications} replication(s) each>")

    def _repr_html_(self) -> str:
        return (f"<b>herdsim comparison: {self.scenario.name}</b> — {len(self.arms)} arms "
                f"varying {self.varied}, replications per arm: {self.replications}; "
                f"best first" + self.table().to_html(index_names=False))


def load_outputs(directory: str | Path) -> Comparison:
    """Read a comparison directory, or a run directory as a one-arm comparison.

    Raises :class:`OutputDirError` when *directory* is neither.
    """
    directory = Path(directory)
    if (directory / COMPARE_MARKER).is_file():
        return _load_comparison(directory)
    if (directory / RUN_MARKER).is_file():
        return _load_run(directory)
    what = "does not exist" if not directory.exists() else "is not a herdsim output directory"
    raise OutputDirError(f"{directory}: {what} (expected the --out directory of "
                         f"'herdsim run' or 'herdsim compare', with {RUN_MARKER} or "
                         f"{COMPARE_MARKER})")


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise OutputDirError(f"{path.parent}: {path.name} is missing") from None
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _read_scenario(directory: Path) -> Scenario:
    return load_scenario(directory / "scenario.yaml")


def _load_comparison(directory: Path) -> Comparison:
    meta = json.loads((directory / COMPARE_MARKER).read_text())
    base = _read_scenario(directory)
    arms = [Arm(a["label"], a["strategy"], a["settings"],
                _arm_scenario(base, a["strategy"], a["settings"], check_strategy=False))
            for a in meta["arms"]]
    peaks_path = directory / "peak_rate.csv"
    peaks = _read_csv(peaks_path) if peaks_path.is_file() else None
    return Comparison(base, arms, meta["replications"], _read_csv(directory / "runs.csv"),
                      _read_csv(directory / "timeseries.csv"),
                      _read_csv(directory / "sleeps.csv"), peaks)


def _load_run(directory: Path) -> Comparison:
    scenario = _read_scenario(directory)
    summary = json.loads((directory / RUN_MARKER).read_text())
    strategy = scenario.retry.strategy
    arm = Arm(short_name(strategy), strategy, {}, scenario)

    def tag(frame: pd.DataFrame) -> pd.DataFrame:
        frame.insert(0, "replication", 0)
        frame.insert(0, "arm", arm.label)
        return frame

    peaks_path = directory / "peak_rate.csv"
    peaks = tag(_read_csv(peaks_path)) if peaks_path.is_file() else None
    runs = pd.DataFrame([{"arm": arm.label, "replication": 0, **summary}])
    return Comparison(scenario, [arm], 1, runs, tag(_read_csv(directory / "timeseries.csv")),
                      tag(_read_csv(directory / "sleeps.csv")), peaks)

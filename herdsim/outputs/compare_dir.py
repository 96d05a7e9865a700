"""Run and comparison directories: one writer and one reader for each.

A comparison directory (``herdsim compare --out DIR``):

- ``summary.csv``: one row per arm (see :mod:`herdsim.results.comparison`);
- ``runs.csv``: one row per arm and replication, the raw summary of each run;
- ``timeseries.csv``: tidy, ``arm``, ``replication``, then the run's time-series columns;
- ``peak_rate.csv``: ``arm``, ``replication``, ``time``, ``peak_rate``: downstream calls
  per second in the busiest ``peak_window`` starting within each bin (what the timeline
  plots; its maximum is the summary's ``peak_attempt_rate``, in a call graph the top
  tier's ``tiers.<top>.peak_calls`` over ``peak_window``);
- ``sleeps.csv``: ``arm``, ``replication``, then every retry sleep (time, job, attempt, sleep);
  beyond :data:`LARGE_TABLE` rows (a storm of millions of retries) ``sleeps.parquet``
  instead, the same columns: CSV would take most of the time spent saving;
- ``crashes.csv`` (a call graph only): ``arm``, ``replication``, ``tier``, ``time`` of
  every crash of every tier (what the timeline draws as each tier's down periods);
- ``scenario.yaml``: the base scenario; ``arms.json``: each arm's label, strategy and
  settings, and the number of replications (and ``unfinished``: the arms an interrupted
  comparison did not run; the arms saved are whole); ``overrides.json``, only when
  ``--set`` changed the scenario: ``path -> value`` as written;
- ``timeline``, ``landing``, ``sleeps``, ``kpis`` figures (``.png`` and ``.svg``, or ``.pdf``),
  and for a call graph ``graph`` (its tiers and edges, one panel per arm); ``report.html``
  when asked for.

A run directory (``herdsim run --out DIR``) holds ``timeseries.csv``, ``sleeps.csv``,
``jobs.parquet``, ``summary.json``, ``scenario.yaml`` (and ``overrides.json``),
``peak_rate.csv`` and, for a call graph, ``crashes.csv`` (both without
``arm``/``replication``) and the ``timeline`` and ``landing`` figures (and ``graph`` for a
call graph). In a call graph ``peak_rate.csv`` is the top tier's calls (the timeline's
rows), the summary's peak its headline tier's.
:func:`load_outputs` reads either kind into a :class:`~herdsim.results.comparison.Comparison`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from herdsim.analysis import tiers
from herdsim.config import arguments
from herdsim.config.scenario import Scenario
from herdsim.errors import FigureError, OutputDirError, ScenarioError, UsageError
from herdsim.outputs import reading
from herdsim.outputs.atomic import staged_dir, staging_dir
from herdsim.plots.figures import FIGURES
from herdsim.plots.kinds import applies
from herdsim.plots.style import save_figure
from herdsim.results.comparison import Arm, Comparison, arm_scenario, peak_rate_frame, short_name
from herdsim.results.result import Result
from herdsim.system.timings import phase

FORMATS = ("png", "svg", "pdf")
LARGE_TABLE = 1_000_000  # rows beyond which a table is written as Parquet (10x faster, 1/3)
RUN_MARKER = "summary.json"
COMPARE_MARKER = "arms.json"
OUTPUT_FILES = ("timeseries.csv", "sleeps.csv", "jobs.parquet", "summary.json", "scenario.yaml")
# jobs.parquet's encodings: a dictionary only for the columns that repeat (pyarrow's default
# builds one for every column and drops it on the unique times: twice the CPU, a tenth
# more bytes), the consecutive job ids as deltas; pandas reads back the same frame
JOBS_PARQUET: dict[str, Any] = {"use_dictionary": ["attempts", "outcome", "key"],
                                "column_encoding": {"job": "DELTA_BINARY_PACKED"}}


def write_table(frame: pd.DataFrame, directory: Path, name: str) -> Path:
    """*frame* as ``directory/name`` (CSV), or, beyond :data:`LARGE_TABLE` rows, as the
    Parquet file of the same stem: the readers take either."""
    if len(frame) > LARGE_TABLE:
        path = directory / Path(name).with_suffix(".parquet").name
        frame.to_parquet(path, index=False)
    else:
        path = directory / name
        frame.to_csv(path, index=False)
    return path


def write_scenario(scenario: Scenario, directory: Path) -> None:
    """``scenario.yaml`` (resolved), and ``overrides.json`` when ``--set`` changed it (what
    the figures' headings name as changed)."""
    (directory / "scenario.yaml").write_text(scenario.to_yaml())
    if scenario.overrides:
        (directory / reading.OVERRIDES).write_text(json.dumps(scenario.overrides, indent=2) + "\n")


def save_figures(comparison: Comparison, directory: Path, formats: Sequence[str],
                 kinds: Sequence[str] = FIGURES) -> list[Path]:
    """Draw figures *kinds* of *comparison* into *directory*, once per format (``graph``
    only for a call graph: see :func:`~herdsim.plots.kinds.applies`)."""
    written = []
    for kind in (k for k in kinds if applies(k, comparison.scenario)):
        with phase(f"draw {kind}: compose"):
            figure = comparison.plot(kind)
        for fmt in formats:
            path = directory / f"{kind}.{fmt}"
            with phase(f"draw {kind}: render {path.name}"):
                save_figure(figure, path, fmt)
            written.append(path)
    return written


@contextlib.contextmanager
def _drawing(failures: list[str]) -> Iterator[None]:
    """Drawing is last and may fail (a figure library's limit): note it, keep the data."""
    try:
        yield
    except Exception as exc:  # the data is worth more than the picture
        failures.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def _report_failures(out: Path, failures: list[str]) -> None:
    if failures:
        raise FigureError(f"{out}: the data is written, but a figure could not be drawn "
                          f"({failures[0]}); 'herdsim plot {out}' retries it")


def redraw(directory: str | Path, formats: Sequence[str],
           kinds: Sequence[str] = FIGURES) -> list[Path]:
    """Redraw figures *kinds* of a run or comparison *directory* from its saved outputs;
    each file is replaced whole (drawn aside, then renamed over the old one)."""
    directory = Path(directory)
    comparison = load_outputs(directory)
    if comparison.drawable != FIGURES:  # a prediction: a timeline, no jobs or sleeps
        kinds = [kind for kind in kinds if kind in comparison.drawable]
        if not kinds:
            raise UsageError(f"{directory}: a prediction draws only "
                             f"{', '.join(comparison.drawable)} (no jobs or sleeps)")
    if not any(applies(kind, comparison.scenario) for kind in kinds):
        raise UsageError(f"{directory}: no figure to draw ({', '.join(kinds)}: "
                         "graph needs a call graph, a scenario with services)")
    with staging_dir(directory, "redraw") as aside:
        drawn = save_figures(comparison, aside, formats, kinds)
        return [path.replace(directory / path.name) for path in drawn]


RUN_FIGURES = ("timeline", "landing", "graph")  # graph: a call graph's only


def save_run(result: Result, out: str | Path, formats: Sequence[str] = ("png",),
             extra: Callable[[Path], None] | None = None) -> Path:
    """Write a single run into the new directory *out*, which appears only once everything
    is written: its frames, summary and scenario, ``peak_rate.csv`` and the ``timeline``
    and ``landing`` figures in each of *formats*; ``extra(staging)`` adds files of its
    own (the testbed's comparison with the simulation)."""
    with staged_dir(out) as staging:
        staging.mkdir()
        with phase("save timeseries.csv"):
            result.timeseries.to_csv(staging / "timeseries.csv", index=False)
        with phase("save sleeps.csv"):
            write_table(result.sleeps, staging, "sleeps.csv")
        with phase("save jobs.parquet"):
            result.jobs.to_parquet(staging / "jobs.parquet", index=False, **JOBS_PARQUET)
        with phase("save summary.json, scenario.yaml"):
            (staging / "summary.json").write_text(json.dumps(result.summary, indent=2) + "\n")
            write_scenario(result.scenario, staging)
        with phase("save peak_rate.csv"):
            peak_rate_frame(result).to_csv(staging / "peak_rate.csv", index=False)
        if result.scenario.services:  # a call graph: when each tier crashed
            with phase("save crashes.csv"):
                result.tier_crashes.to_csv(staging / CRASHES, index=False)
        failures: list[str] = []
        with _drawing(failures):
            save_figures(Comparison.from_result(result), staging, formats, RUN_FIGURES)
        if extra is not None:
            extra(staging)
    _report_failures(Path(out), failures)
    return Path(out)


def save_comparison(comparison: Comparison, out: str | Path,
                    formats: Sequence[str] = ("png", "svg"), report: bool = False) -> Path:
    """Write the layout of the module docstring into the new directory *out*."""
    with staged_dir(out) as staging:
        staging.mkdir()
        with phase("save summary.csv, runs.csv"):
            comparison.summary.to_csv(staging / "summary.csv", index=False)
            comparison.runs.to_csv(staging / "runs.csv", index=False)
        with phase("save timeseries.csv"):
            comparison.timeseries.to_csv(staging / "timeseries.csv", index=False)
        if comparison.peaks is not None:
            with phase("save peak_rate.csv"):
                comparison.peaks.to_csv(staging / "peak_rate.csv", index=False)
        with phase("save sleeps.csv"):
            write_table(comparison.sleeps, staging, "sleeps.csv")
        if comparison.crashes is not None and comparison.scenario.services:
            with phase("save crashes.csv"):
                comparison.crashes.to_csv(staging / CRASHES, index=False)
        with phase("save scenario.yaml, arms.json"):
            write_scenario(comparison.scenario, staging)
            arms = [{"label": a.label, "strategy": a.strategy, "settings": a.settings}
                    for a in comparison.arms]
            meta = {"replications": comparison.replications, "arms": arms}
            if comparison.unfinished:  # an interrupted comparison: these arms were not run
                meta["unfinished"] = list(comparison.unfinished)
            (staging / COMPARE_MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        failures: list[str] = []
        with _drawing(failures):
            save_figures(comparison, staging, formats)
            if report:  # the PNGs just drawn go into the page as they are
                from herdsim.outputs.report import write_report  # not for a plain save

                with phase("save report.html"):
                    write_report(staging, comparison, fresh=True)
    _report_failures(Path(out), failures)
    return Path(out)


def load_outputs(directory: str | Path) -> Comparison:
    """Read a comparison directory, or a run directory as a one-arm comparison, checking
    every file against what the writer wrote (see :mod:`herdsim.outputs.reading`).

    Raises :class:`OutputDirError` when *directory* is neither, or is damaged.
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


TIMESERIES_COLUMNS = ("time", "arrivals", "attempts", "success", "retry", "failed_dlq")
SLEEP_COLUMNS = ("time", "attempt", "sleep")
SLEEP_KINDS = {"time": reading.NONNEGATIVE, "attempt": reading.COUNT,
               "sleep": reading.NONNEGATIVE, "replication": reading.COUNT}
CRASHES = "crashes.csv"
CRASH_KINDS = {"time": reading.NONNEGATIVE, "replication": reading.COUNT}
PEAK_KINDS = {"time": reading.NONNEGATIVE, "peak_rate": reading.NONNEGATIVE,
              "replication": reading.COUNT}


def _load_comparison(directory: Path) -> Comparison:
    meta = reading.json_file(directory, COMPARE_MARKER, reading.arms_problem)
    base = reading.scenario(directory)
    try:
        arms = [Arm(a["label"], a["strategy"], a["settings"],
                    arm_scenario(base, a["strategy"], a["settings"], check_strategy=False))
                for a in meta["arms"]]
    except ScenarioError as exc:
        raise OutputDirError(f"{directory / COMPARE_MARKER}: an arm's settings do not fit "
                             f"scenario.yaml ({str(exc).splitlines()[0]})") from None
    keys = ("arm", "replication")
    timeseries = reading.timeseries(directory, base, (*TIMESERIES_COLUMNS, "replication"),
                                    ("arm",))
    peaks_path = directory / "peak_rate.csv"
    peaks = (reading.csv(directory, "peak_rate.csv", ("time", "peak_rate", "replication"),
                         ("arm",), kinds=PEAK_KINDS) if peaks_path.is_file() else None)
    crashes = (reading.csv(directory, CRASHES, ("time", "replication"), ("arm", "tier"),
                           kinds=CRASH_KINDS) if (directory / CRASHES).is_file() else None)
    runs = reading.csv(directory, "runs.csv", ("replication",), ("arm",), empty_ok=False)
    sleeps = reading.csv(directory, "sleeps.csv", (*SLEEP_COLUMNS, "replication"), ("arm",),
                          kinds=SLEEP_KINDS)
    labels = {arm.label for arm in arms}
    for name, frame in (("runs.csv", runs), ("timeseries.csv", timeseries)):
        strange = set(frame["arm"].astype(str)) - labels
        if strange or len(frame.groupby(list(keys))) != len(labels) * meta["replications"]:
            raise OutputDirError(f"{directory / name}: its arms and replications do not match "
                                 f"{COMPARE_MARKER}")
    unfinished = meta.get("unfinished", [])
    if not isinstance(unfinished, list) or not all(isinstance(a, str) for a in unfinished):
        raise OutputDirError(f"{directory / COMPARE_MARKER}: 'unfinished' must be a list of "
                             "arm labels")
    return Comparison(base, arms, meta["replications"], runs, timeseries, sleeps, peaks,
                      unfinished, crashes)


def _load_run(directory: Path) -> Comparison:
    scenario = reading.scenario(directory)
    summary = reading.json_file(directory, RUN_MARKER, reading.summary_problem)
    if summary.get("predicted") is not None:  # herdsim predict's: no jobs, no sleeps
        return _load_prediction(directory, scenario, summary)
    strategy = scenario.retry.strategy
    arm = Arm(short_name(strategy), strategy, {}, scenario)

    def tag(frame: pd.DataFrame) -> pd.DataFrame:
        frame.insert(0, "replication", 0)
        frame.insert(0, "arm", arm.label)
        return frame

    timeseries = reading.timeseries(directory, scenario, TIMESERIES_COLUMNS)
    peaks_path = directory / "peak_rate.csv"
    peaks = (tag(reading.csv(directory, "peak_rate.csv", ("time", "peak_rate"),
                                 kinds=PEAK_KINDS))
             if peaks_path.is_file() else None)
    crashes = (tag(reading.csv(directory, CRASHES, ("time",), ("tier",), kinds=CRASH_KINDS))
               if (directory / CRASHES).is_file() else None)
    runs = pd.DataFrame([{"arm": arm.label, "replication": 0, **tiers.flat(summary)}])
    return Comparison(scenario, [arm], 1, runs, tag(timeseries),
                      tag(reading.csv(directory, "sleeps.csv", SLEEP_COLUMNS,
                                      kinds=SLEEP_KINDS)), peaks, crashes=crashes)


def _load_prediction(directory: Path, scenario: Scenario, summary: dict) -> Comparison:
    """A ``herdsim predict`` directory (:mod:`herdsim.outputs.predicted_dir`; its scenario
    and checked summary read) as the one-arm comparison the prediction gives: its counters
    mean amounts, every figure and the report saying predicted."""
    from herdsim.results.predicted import Prediction

    timeseries = reading.timeseries(directory, scenario, TIMESERIES_COLUMNS,
                                    counters=reading.NONNEGATIVE)
    peaks = reading.csv(directory, "peak_rate.csv", ("time", "peak_rate"), kinds=PEAK_KINDS)
    return Prediction(scenario, timeseries, peaks, summary).comparison()


def save(what: Result | Comparison, out: str | Path, formats: Sequence[str] | None = None,
         report: bool = False) -> Path:
    """Write a run or a comparison into the new directory *out* (see the module doc);
    figures as PNG for a run, PNG and SVG for a comparison, unless *formats* says (an
    empty list: no figures)."""
    out = arguments.path("out", out)
    chosen = arguments.names("formats", formats, FORMATS, empty_ok=True)
    if isinstance(what, Result):
        return save_run(what, out, ("png",) if chosen is None else chosen)
    if not isinstance(what, Comparison):
        raise UsageError(f"save({type(what).__name__}): expected a Result (herdsim.run) or "
                         "a Comparison (herdsim.compare)")
    return save_comparison(what, out, ("png", "svg") if chosen is None else chosen, report)

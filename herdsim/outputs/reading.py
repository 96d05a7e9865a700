"""Reading what herdsim wrote, and nothing else: every reader of an output directory
goes through here.

Each file is read only as a regular file (:mod:`herdsim.config.files`), checked against
``checksums.json`` (see :mod:`herdsim.outputs.atomic`), then against what its writer
writes: a CSV's columns, their dtypes and their values (finite; counts whole and >= 0),
a JSON file's shape, a time series' rows against the scenario's ``duration / bin`` with
time stepping by the bin on every row, a summary's KPIs against the KPI registry. Any
problem is one :class:`~herdsim.errors.OutputDirError` naming the file and what is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis import classes, replicas, tiers
from herdsim.analysis.kpis import BY_KEY
from herdsim.analysis.kpis.predicted import NEAR
from herdsim.config import files
from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario
from herdsim.errors import OutputDirError, ScenarioError
from herdsim.model.downstream import defences
from herdsim.model.recorder import GAUGES, MECHANISM_GAUGES
from herdsim.outputs.atomic import verify


def scenario(directory: Path) -> Scenario:
    """``scenario.yaml`` of an output directory, validated without importing any code it
    names (a strategy given as ``module:Class`` stays a name), with the ``--set`` changes
    of its ``overrides.json``."""
    verify(directory, "scenario.yaml")
    try:
        sc = load_scenario(directory / "scenario.yaml", trust_code=False, sealed=True)
    except ScenarioError as exc:
        if exc.problems == [("", "no such file")]:
            raise OutputDirError(f"{directory}: scenario.yaml is missing") from None
        raise
    if (directory / OVERRIDES).exists():
        sc.overridden(json_file(directory, OVERRIDES, _overrides_problem))
    return sc


OVERRIDES = "overrides.json"  # what --set changed, beside scenario.yaml (only when it did)


def _overrides_problem(data: object) -> str | None:
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in data.items()):
        return "expected an object of field paths to values as --set wrote them"
    return None


COUNT, NONNEGATIVE, REAL = "a whole number >= 0", "a finite number >= 0", "a finite number"
MAYBE = "a finite number >= 0 or empty"  # a defence's gauge, empty in an arm without it


def csv(directory: Path, name: str, numeric: Sequence[str] = (), text: Sequence[str] = (),
        empty_ok: bool = True, kinds: dict[str, str] | None = None,
        every: str | None = None) -> pd.DataFrame:
    """``directory/name`` as a frame with at least the *numeric* and *text* columns; each
    numeric column holds finite numbers of its kind in *kinds* (:data:`COUNT`,
    :data:`NONNEGATIVE`, default :data:`REAL`). With *every* (a kind), every other column
    that is not *text* is numeric too, of that kind unless *kinds* says. A table the writer
    stored as Parquet for its size (``sleeps.parquet`` beside no ``sleeps.csv``, see
    :data:`herdsim.outputs.compare_dir.LARGE_TABLE`) is read instead."""
    twin = Path(name).with_suffix(".parquet").name
    if not (directory / name).exists() and (directory / twin).is_file():
        name = twin
    path = directory / name
    verify(directory, name)
    try:
        with open(files.open_regular(path), "rb") as stream:
            frame = (pd.read_parquet(stream) if name.endswith(".parquet")
                     else pd.read_csv(stream))
    except FileNotFoundError:
        raise OutputDirError(f"{directory}: {name} is missing") from None
    except OSError as exc:
        raise OutputDirError(f"{path}: {exc.strerror}") from None
    except pd.errors.EmptyDataError:
        if not empty_ok:
            raise OutputDirError(f"{path}: empty") from None
        return pd.DataFrame({column: pd.Series(dtype=float) for column in numeric}
                            | {column: pd.Series(dtype=object) for column in text})
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise OutputDirError(f"{path}: not a CSV table ({_first_line(exc)})") from None
    missing = [column for column in (*numeric, *text) if column not in frame.columns]
    if missing:
        raise OutputDirError(f"{path}: missing column(s) {', '.join(missing)}")
    kinds = dict(kinds or {})
    checked = list(numeric)
    if every is not None:
        checked += [c for c in frame.columns if c not in (*numeric, *text, *LABELS)]
        kinds = {c: every for c in checked} | kinds
    for column in checked:
        _check_column(path, frame, column, kinds.get(column, REAL))
    return frame


def _check_column(path: Path, frame: pd.DataFrame, column: str, kind: str) -> None:
    """Every value of *column* numeric, finite and of *kind* (see :func:`csv`)."""
    if len(frame) == 0:
        frame[column] = frame[column].astype(float)
        return
    if not pd.api.types.is_numeric_dtype(frame[column]):
        bad = frame[column][pd.to_numeric(frame[column], errors="coerce").isna()
                            & frame[column].notna()]
        where = (f"row {bad.index[0] + 2}: {str(bad.iloc[0])[:40]!r}" if len(bad)
                 else "empty cells")
        raise OutputDirError(f"{path}: column {column} holds non-numbers ({where})")
    values = frame[column].to_numpy(dtype=float)
    wrong = np.isinf(values) if kind == MAYBE else ~np.isfinite(values)
    if kind in (COUNT, NONNEGATIVE, MAYBE):
        wrong |= values < 0
    if kind == COUNT:
        wrong |= values != np.round(values)
    if wrong.any():
        row = int(np.argmax(wrong))
        raise OutputDirError(f"{path}: column {column} row {row + 2} holds "
                             f"{values[row]!r}, not {kind}")


def json_file(directory: Path, name: str, check: Callable[[Any], str | None]) -> Any:
    """``directory/name`` parsed; *check* returns what is wrong with it, or None."""
    path = directory / name
    verify(directory, name)
    try:
        data = json.loads(files.read_bytes(path).decode("utf-8"),
                          parse_constant=no_constant)
    except FileNotFoundError:
        raise OutputDirError(f"{directory}: {name} is missing") from None
    except OSError as exc:
        raise OutputDirError(f"{path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise OutputDirError(f"{path}: not JSON ({_first_line(exc)})") from None
    problem = check(data)
    if problem:
        raise OutputDirError(f"{path}: {problem}")
    return data


def rows(frame: pd.DataFrame, scenario: Scenario, path: Path,
         by: Sequence[str] = ()) -> None:
    """Refuse a time series whose rows per run differ from ``ceil(duration / bin)``: a
    truncated file must not be read as a shorter run."""
    expected = max(1, math.ceil(scenario.duration / scenario.bin - 1e-9))
    counts = frame.groupby(list(by)).size() if by else pd.Series([len(frame)])
    wrong = counts[counts != expected]
    if len(frame) == 0 or len(wrong):
        got = int(wrong.iloc[0]) if len(wrong) else 0
        raise OutputDirError(f"{path}: {got} rows per run where the scenario's duration "
                             f"and bin give {expected}; the file is truncated or not this "
                             "run's")
    times = frame["time"].to_numpy(dtype=float).reshape(-1, expected)
    steps = np.arange(expected) * scenario.bin
    if not (np.abs(times - steps) <= 1e-6 * max(scenario.duration, 1.0)).all():
        raise OutputDirError(f"{path}: its time column does not step by the scenario's bin "
                             "from 0 on every row")


LABELS = ("arm",)  # text columns of tidy frames: which arm a row belongs to
RUN_KEYS = ("arm", "replication")  # the columns that tell the runs of a tidy frame apart


def timeseries(directory: Path, scenario: Scenario, required: Sequence[str],
               text: Sequence[str] = (), counters: str = COUNT) -> pd.DataFrame:
    """``timeseries.csv`` with at least the *required* and *text* columns, every column
    checked: counters (events per bin) of kind *counters* (whole numbers >= 0; a
    prediction's mean amounts: :data:`NONNEGATIVE`), gauges finite and >= 0, and time
    stepping by the scenario's bin from 0 in every run (by ``arm`` and ``replication``
    when the file has them)."""
    kinds = ({"time": NONNEGATIVE} | {gauge: NONNEGATIVE for gauge in GAUGES}
             | {gauge: MAYBE for gauge in (*defences.GAUGES, *MECHANISM_GAUGES)}
             | {f"{name}_{gauge}": MAYBE for name in scenario.services  # a service's own
                for gauge in MECHANISM_GAUGES})
    frame = csv(directory, "timeseries.csv", list(required), list(text), empty_ok=False,
                kinds=kinds, every=counters)
    rows(frame, scenario, directory / "timeseries.csv",
         [key for key in RUN_KEYS if key in frame.columns])
    return frame


def summary_problem(summary: object) -> str | None:
    """What is wrong with a run's ``summary.json``, if anything: every KPI of the registry
    must have its kind's type (counts whole numbers >= 0, fractions within 0..1, other
    numbers finite and >= 0, flags true or false, texts text; null only where a ratio or a
    time may be undefined, or the KPI is optional). A prediction's (``predicted`` set)
    holds mean amounts: its counts need not be whole, and its state may be
    ``near threshold``."""
    if not isinstance(summary, dict) or not summary:
        return "expected an object of KPIs"
    means = summary.get("predicted") is not None
    for key, value in summary.items():
        if key == "tiers":  # a call graph's numbers per tier
            found = tiers.problem(value, _kind_problem)
            if found:
                return found
            continue
        if key in ("replicas", "classes"):  # each tier's replicas, each class's numbers
            found = (replicas if key == "replicas" else classes).problem(value)
            if found:
                return found
            continue
        kpi = BY_KEY.get(key)
        if kpi is not None and value is None and kpi.kind in ("text", "flag", "count") \
                and not kpi.optional:
            return f"KPI {key} is missing (null)"
        if kpi is None or value is None:
            if not (value is None or isinstance(value, (str, bool)) or _finite(value)):
                return f"KPI {key} has no usable value ({str(value)[:40]!r})"
            continue
        problem = _kind_problem("real" if means and kpi.kind == "count" else kpi.kind, value)
        named = (*kpi.classes, NEAR) if means else kpi.classes
        if kpi.classes and value not in named:
            problem = f"one of {', '.join(named)}"
        if problem:
            return f"KPI {key} must be {problem}, got {str(value)[:40]!r}"
    return None


def _kind_problem(kind: str, value: Any) -> str | None:
    if kind == "text":
        return None if isinstance(value, str) else "text"
    if kind == "flag":
        return None if isinstance(value, bool) else "true or false"
    if isinstance(value, bool) or not _finite(value):
        return "a finite number"
    if kind == "count" and (value < 0 or value != int(value)):
        return "a whole number >= 0"
    if kind == "fraction" and not 0 <= value <= 1:
        return "a fraction between 0 and 1"
    if value < 0:  # every KPI counts, times or rates something
        return "a number >= 0"
    return None


def _finite(value: object) -> bool:
    """A finite real number (a whole number of any size is one; NaN and inf are not)."""
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def no_constant(name: str) -> None:
    """``json.loads``' ``parse_constant``: NaN and Infinity are not numbers herdsim writes."""
    raise ValueError(f"{name} is not a number herdsim writes")


def arms_problem(meta: object) -> str | None:
    """What is wrong with the content of a comparison's ``arms.json``, if anything."""
    if not isinstance(meta, dict) or not isinstance(meta.get("arms"), list) or not meta["arms"]:
        return "expected an object with a non-empty list 'arms'"
    replications = meta.get("replications")
    if not isinstance(replications, int) or isinstance(replications, bool) or replications < 1:
        return f"'replications' must be a whole number >= 1, got {replications!r}"
    for i, arm in enumerate(meta["arms"]):
        if not (isinstance(arm, dict) and isinstance(arm.get("label"), str)
                and isinstance(arm.get("strategy"), str)
                and isinstance(arm.get("settings"), dict)):
            return f"arms[{i}] needs a label, a strategy (text) and settings (an object)"
    return None


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]

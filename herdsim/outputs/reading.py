"""Reading what herdsim wrote, and nothing else: every reader of an output directory
goes through here.

Each file is checked against ``checksums.json`` (see :mod:`herdsim.outputs.atomic`), then
against what its writer writes: a CSV's columns and their dtypes, a JSON file's shape,
a time series' row count against the scenario's ``duration / bin``. Any problem is one
:class:`~herdsim.errors.OutputDirError` naming the file and what is wrong with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from herdsim.config.scenario import Scenario, load_scenario
from herdsim.errors import OutputDirError, ScenarioError
from herdsim.outputs.atomic import verify


def scenario(directory: Path) -> Scenario:
    """``scenario.yaml`` of an output directory, validated without importing any code it
    names (a strategy given as ``module:Class`` stays a name)."""
    verify(directory, "scenario.yaml")
    try:
        return load_scenario(directory / "scenario.yaml", trust_code=False)
    except ScenarioError as exc:
        if exc.problems == [("", "no such file")]:
            raise OutputDirError(f"{directory}: scenario.yaml is missing") from None
        raise


def csv(directory: Path, name: str, numeric: Sequence[str] = (), text: Sequence[str] = (),
        empty_ok: bool = True) -> pd.DataFrame:
    """``directory/name`` as a frame with at least the *numeric* and *text* columns; a
    table the writer stored as Parquet for its size (``sleeps.parquet`` beside no
    ``sleeps.csv``, see :data:`herdsim.outputs.compare_dir.LARGE_TABLE`) is read instead."""
    twin = Path(name).with_suffix(".parquet").name
    if not (directory / name).exists() and (directory / twin).is_file():
        name = twin
    path = directory / name
    verify(directory, name)
    try:
        frame = pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)
    except FileNotFoundError:
        raise OutputDirError(f"{directory}: {name} is missing") from None
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
    for column in numeric:
        if len(frame) == 0:
            frame[column] = frame[column].astype(float)
        elif not pd.api.types.is_numeric_dtype(frame[column]):
            bad = frame[column][pd.to_numeric(frame[column], errors="coerce").isna()
                                & frame[column].notna()]
            raise OutputDirError(f"{path}: column {column} holds non-numbers "
                                 f"(row {bad.index[0] + 2}: {str(bad.iloc[0])[:40]!r})")
    return frame


def json_file(directory: Path, name: str, check: Callable[[Any], str | None]) -> Any:
    """``directory/name`` parsed; *check* returns what is wrong with it, or None."""
    path = directory / name
    verify(directory, name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OutputDirError(f"{directory}: {name} is missing") from None
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
    times = frame["time"].to_numpy()
    if not (times[: expected] >= 0).all() or abs(times[expected - 1] - (expected - 1)
                                                  * scenario.bin) > 1e-6 * scenario.duration:
        raise OutputDirError(f"{path}: its time column does not step by the scenario's bin")


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

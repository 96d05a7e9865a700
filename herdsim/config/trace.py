"""Recorded arrival traces: read safely, one line at a time.

Two formats: ``csv`` (a header naming a ``time`` column, in seconds; other columns
ignored) and ``osdi`` (the whitespace lines of the OSDI'22 metastability artifact,
``arrival_s request_type size key``; only the first field is read, ``#`` lines and blank
lines skipped). Times must be finite, non-negative and sorted (equal times allowed). A
file is never read whole: :func:`times` yields one time per line, and a problem is a
:class:`~herdsim.errors.ScenarioError` naming the file and the line.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from herdsim.config import files
from herdsim.errors import ScenarioError

FORMATS = ("csv", "osdi")
MAX_LINE = 65_536  # bytes of one line: a longer one is not a trace
MAX_BINS = 10_000_000  # bins of a trace's rate profile: 116 days of 1 s bins, 80 MB


def _error(path: Path, line: int | None, problem: str) -> ScenarioError:
    where = f"line {line}: " if line else ""
    return ScenarioError([("workload.trace.file", f"{path}: {where}{problem}")])


def _lines(path: Path, digest=None) -> Iterator[tuple[int, str]]:
    """``(number, text)`` of each line of *path* (UTF-8), feeding *digest* the raw bytes."""
    try:
        handle = open(files.open_regular(path), "rb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        raise _error(path, None, "no such file") from None
    except IsADirectoryError:
        raise _error(path, None, "a directory, not a trace file") from None
    except files.NotRegularFile as exc:
        raise _error(path, None, f"{exc.strerror}; not a trace file") from None
    except OSError as exc:
        raise _error(path, None, f"cannot read: {exc.strerror}") from None
    with handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE)
            if not raw:
                return
            number += 1
            if digest is not None:
                digest.update(raw)
            if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
                raise _error(path, number, f"longer than {MAX_LINE:,} bytes; not a trace")
            if b"\x00" in raw:
                raise _error(path, number, "holds NUL bytes; a binary file, not a trace")
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise _error(path, number, "not UTF-8 text") from None
            yield number, text


def _csv_fields(path: Path, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """``(line, time field)`` of each CSV row after the header."""
    header = next(lines, None)
    if header is None:
        raise _error(path, None, "the file is empty")
    names = [name.strip() for name in next(csv.reader([header[1]]), [])]
    if "time" not in names:
        raise _error(path, 1, f"no 'time' column in the header (got {', '.join(names)!s})")
    column = names.index("time")
    for number, text in lines:
        if not text.strip():
            continue
        row = next(csv.reader([text]))
        if column >= len(row):
            raise _error(path, number, f"{len(row)} fields; the time column is field "
                                       f"{column + 1}")
        yield number, row[column]


def _osdi_fields(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """``(line, arrival_s)`` of each non-blank, non-comment line."""
    for number, text in lines:
        fields = text.split()
        if fields and not fields[0].startswith("#"):
            yield number, fields[0]


def times(path: str | Path, fmt: str, digest=None) -> Iterator[float]:
    """The arrival times of the trace at *path* in format *fmt*, as written (in seconds),
    one line at a time; *digest* (a ``hashlib`` object), if given, sees every byte."""
    path = Path(path)
    if fmt not in FORMATS:
        raise _error(path, None, f"unknown format {fmt!r} (expected {' or '.join(FORMATS)})")
    lines = _lines(path, digest)
    fields = _csv_fields(path, lines) if fmt == "csv" else _osdi_fields(lines)
    previous = 0.0
    for number, field in fields:
        try:
            value = float(field)
        except ValueError:
            raise _error(path, number, f"time {field.strip()[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise _error(path, number, f"time {field.strip()!r} is not finite")
        if value < 0:
            raise _error(path, number, f"time {value:g} is negative")
        if value < previous:
            raise _error(path, number, f"time {value:g} comes before the previous line's "
                                       f"{previous:g}; a trace must be sorted")
        previous = value
        yield value


@dataclass(frozen=True)
class Scan:
    """What one pass over a trace learns: how many times, the first and last, how many
    (scaled) fall before *until*, and the file's SHA-256."""

    count: int
    first: float | None
    last: float | None
    within: int
    sha256: str


def scan(path: str | Path, fmt: str, time_scale: float = 1.0, start: float = 0.0,
         until: float = math.inf) -> Scan:
    """Read the whole trace once (streamed): its count, span, arrivals before *until*
    and SHA-256. Raises :class:`ScenarioError` naming the line of the first problem."""
    digest = hashlib.sha256()
    count = within = 0
    first = last = None
    for value in times(path, fmt, digest):
        if first is None:
            first = value
        last = value
        count += 1
        if value * time_scale + start < until:
            within += 1
    return Scan(count, first, last, within, digest.hexdigest())



def bin_counts(path: str | Path, fmt: str, width: float) -> list[int]:
    """Arrivals of the trace per *width*-second bin from 0 to its last time (streamed;
    memory grows with the span, not the count: a time past :data:`MAX_BINS` bins is
    refused, naming the arrival, before anything is allocated for it)."""
    counts: list[int] = []
    for number, value in enumerate(times(path, fmt), start=1):
        bins = value / width
        if bins >= MAX_BINS:
            raise _error(Path(path), None, f"arrival {number:,} at {value:g} s lies "
                                           f"{bins:.3g} bins of {width:g} s from 0 (at most "
                                           f"{MAX_BINS:,}); choose a wider --bin")
        index = int(value // width)
        if index >= len(counts):
            counts.extend([0] * (index + 1 - len(counts)))
        counts[index] += 1
    return counts


def profile(counts: list[int], width: float) -> list[dict]:
    """A ``workload.profile`` with a step at each bin whose rate (count / width) differs
    from the last. A profile's first rate must be > 0: if the trace starts with empty
    bins, the first step takes the rate of the first bin that is not (the caller says
    so)."""
    steps: list[dict] = []
    for index, count in enumerate(counts):
        rate = count / width
        if steps and steps[-1]["rate"] == rate:
            continue
        steps.append({"at": index * width, "rate": rate})
    if steps and steps[0]["rate"] == 0:  # the base rate must be > 0
        steps[0]["rate"] = next((s["rate"] for s in steps if s["rate"] > 0), 0.0)
        if len(steps) > 1 and steps[1]["rate"] == steps[0]["rate"]:
            del steps[1]
    return steps

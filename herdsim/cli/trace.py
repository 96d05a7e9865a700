"""``herdsim trace FILE``: a recorded trace's summary, and a rate profile made from it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from herdsim.cli.app import app, console
from herdsim.config import files
from herdsim.config import trace as traces
from herdsim.config.reading import parse_yaml
from herdsim.errors import OutputExistsError, ScenarioError, UsageError
from herdsim.outputs.atomic import write_file
from herdsim.policies.durations import format_duration, parse_duration


def _seconds(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--bin {text!r}: {exc}") from None
    if seconds <= 0:
        raise UsageError(f"--bin {text!r}: expected a duration > 0")
    return seconds


@app.command("trace")
def trace(
    file: Annotated[Path, typer.Argument(help="The trace file.", show_default=False)],
    format_: Annotated[str, typer.Option("--format", help="csv (a time column) or osdi "
                                         "(arrival_s request_type size key).")] = "csv",
    bin_: Annotated[str, typer.Option("--bin", help="Width of the bins the rates are "
                                      "counted in.")] = "1s",
    profile: Annotated[Path | None, typer.Option(
        "--profile", help="Also write a workload.profile (one step per change of the "
        "binned rate) to this new YAML file.", show_default=False)] = None,
) -> None:
    """Summarise a recorded trace: count, span and rate percentiles per --bin; --profile
    writes the rates as a scenario's workload.profile."""
    import numpy as np  # here, not at import: the command line's --help stays quick

    width = _seconds(bin_)
    if profile is not None and profile.exists():
        raise OutputExistsError(f"{profile}: already exists; choose another --profile")
    try:
        counts = traces.bin_counts(file, format_, width)
    except ScenarioError as exc:
        raise UsageError(str(exc).removeprefix("workload.trace.file: ")) from None
    total = sum(counts)
    if total == 0:
        raise UsageError(f"{file}: no arrival in the trace")
    if profile is not None:  # refused before anything is said or written
        steps = traces.profile(counts, width)
        text = yaml.safe_dump({"workload": {"profile": steps}}, sort_keys=False,
                              default_flow_style=None)
        _readable(text, len(steps), profile, width)
    rates = np.asarray(counts, dtype=float) / width
    first = next(i for i, c in enumerate(counts) if c) * width
    p50, p90, p99 = np.percentile(rates, [50, 90, 99])
    console.print(f"{file}: {total:,} arrivals over {format_duration(len(counts) * width)} "
                  f"(first bin with one at {format_duration(first)})", highlight=False,
                  markup=False, soft_wrap=True)
    console.print(f"rate per {format_duration(width)} bin (jobs/s): mean "
                  f"{total / (len(counts) * width):,.4g}, p50 {p50:,.4g}, p90 {p90:,.4g}, "
                  f"p99 {p99:,.4g}, max {rates.max():,.4g}", highlight=False, soft_wrap=True)
    if profile is None:
        return
    write_file(profile, text)
    note = (f"; the first {format_duration(first)} hold no arrival, the profile starts at "
            "the first non-empty bin's rate (a base rate must be > 0)" if first else "")
    console.print(f"profile: {len(steps)} steps written to {profile}{note}",
                  highlight=False, markup=False, soft_wrap=True)


def _readable(text: str, steps: int, profile: Path, width: float) -> None:
    """Refuse a profile herdsim's own scenario reader would refuse (over 1 MiB, or over
    its count of values), before anything is written."""
    size = len(text.encode())
    try:
        if size > files.SCENARIO_LIMIT:
            raise ValueError(f"{size:,} bytes, more than the {files.SCENARIO_LIMIT:,} a "
                             "scenario file may hold")
        parse_yaml(text)
    except (ValueError, ScenarioError) as exc:
        problem = str(exc).removeprefix(": ")
        raise UsageError(f"--profile {profile}: {steps:,} steps would be {problem}; choose "
                         f"a wider --bin than {format_duration(width)}") from None

"""Read-only commands over saved outputs: ``plot``, ``report``, ``export``, ``prometheus``."""

from __future__ import annotations

import math
import signal
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herdsim.cli.app import (
    FORMAT,
    Boundary,
    FormatOpt,
    IntervalOpt,
    OutputDirArg,
    ReplicationOpt,
    RunDirArg,
    StartOpt,
    app,
    console,
    err_console,
    parse_formats,
    parse_list,
    safe,
)
from herdsim.errors import UsageError
from herdsim.plots.kinds import FIGURES
from herdsim.policies.durations import parse_duration

if TYPE_CHECKING:
    from herdsim.outputs import openmetrics

def parse_start(text: str) -> float:
    """``--start``: unix seconds (``1700000000``) or an ISO date-time (UTC unless it says)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--start {text!r}: neither unix seconds nor an ISO "
                         "date-time such as 2024-05-01T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def parse_interval(text: str | None) -> float | None:
    """``--interval``: a duration (``1s``, ``500ms``), or None for the run's bin."""
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--interval: {exc}") from None
    if not math.isfinite(seconds):
        raise UsageError(f"--interval {text}: not a finite duration")
    return seconds


def parse_buckets(text: str) -> list[float]:
    """``--buckets``: comma-separated bounds in seconds or durations (``0.1,1,250ms``)."""
    try:
        return [parse_duration(item) for item in text.split(",") if item.strip()]
    except ValueError as exc:
        raise UsageError(f"--buckets: {exc}") from None


KindsOpt = Annotated[str, typer.Option(
    "--kinds", metavar="KINDS",
    help=f"Figures to draw, comma-separated: {', '.join(FIGURES)}.")]


@app.command()
def plot(directory: OutputDirArg, fmt: FormatOpt = FORMAT,
         kinds: KindsOpt = ",".join(FIGURES)) -> None:
    """Redraw the figures of a run or compare directory (the map of a sweep directory)."""
    from herdsim.outputs import sweep_dir
    from herdsim.outputs.compare_dir import redraw

    formats = parse_formats(fmt)
    chosen = parse_list("--kinds", kinds)
    wrong = [k for k in chosen if k not in FIGURES]
    if wrong:
        raise UsageError(f"--kinds {','.join(wrong)}: choose among {', '.join(FIGURES)}")
    with console.status("drawing…"):
        if (directory / sweep_dir.MANIFEST).exists():
            written = sweep_dir.save_map(directory, formats)
        else:
            written = redraw(directory, formats, chosen)
    console.print("wrote " + ", ".join(safe(path) for path in written), soft_wrap=True)


@app.command()
def report(directory: OutputDirArg) -> None:
    """Write a self-contained report.html (verdict, KPIs, timeline, figures) into DIR: a run,
    compare or sweep directory."""
    from herdsim.outputs import sweep_dir
    from herdsim.outputs.compare_dir import load_outputs
    from herdsim.outputs.report import write_report, write_sweep_report

    with console.status("writing the report…"):
        if (directory / sweep_dir.MANIFEST).exists():
            path = write_sweep_report(directory)
        else:
            path = write_report(directory, load_outputs(directory))
    console.print(f"report: [bold]{safe(path)}[/]")


export_app = typer.Typer(help="Export a run's outputs for other tools.", no_args_is_help=True,
                         cls=Boundary, rich_markup_mode=None)
app.add_typer(export_app, name="export")


def report_export(exported: openmetrics.Export) -> None:
    span = f"{datetime.fromtimestamp(exported.start):%Y-%m-%d %H:%M:%S} to " \
           f"{datetime.fromtimestamp(exported.end):%H:%M:%S}"
    console.print(f"wrote {exported.samples:,} samples of {exported.series} series "
                  f"({span}) to [bold]{safe(exported.path)}[/]")
    console.print(f"load it with: promtool tsdb create-blocks-from openmetrics "
                  f"{safe(exported.path)} DATA_DIR", highlight=False, soft_wrap=True)
    console.print(f"in Grafana, append to the dashboard's URL: ?from={exported.start * 1000:.0f}"
                  f"&to={exported.end * 1000:.0f}", highlight=False, soft_wrap=True)


def metrics_beside(target: Path, say: bool) -> None:
    """``--prometheus`` of run and compare: *target*'s metrics.om written (a phase of
    ``--timings``), and what was written said when *say*."""
    from herdsim.outputs import openmetrics
    from herdsim.system import timings as clock

    with clock.phase("export metrics.om"):
        exported = openmetrics.export(target)
    if say:
        report_export(exported)


@export_app.command("prometheus")
def export_prometheus(
    directory: RunDirArg, out: Annotated[Path | None, typer.Option(
        "--out", metavar="FILE", help="File to write (default: DIR/metrics.om).",
        show_default=False)] = None,
    start: StartOpt = None, interval: IntervalOpt = None,
    buckets: Annotated[str | None, typer.Option(
        "--buckets", metavar="BOUNDS",
        help="Histogram bucket bounds, comma-separated (s or 250ms); default: "
             "Prometheus's default buckets, 5ms to 10s.", show_default=False)] = None,
    replication: ReplicationOpt = 0,
) -> None:
    """Write the run's metrics as OpenMetrics text for promtool's backfill."""
    from herdsim.outputs import openmetrics

    bounds = openmetrics.DEFAULT_BUCKETS if buckets is None else parse_buckets(buckets)
    report_export(openmetrics.export(
        directory, out, None if start is None else parse_start(start), parse_interval(interval),
        bounds, replication))


@app.command("prometheus")
def prometheus_command(
    directory: RunDirArg,
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port on 127.0.0.1.")] = 9090,
    start: StartOpt = None, interval: IntervalOpt = None, replication: ReplicationOpt = 0,
) -> None:
    """Backfill a run into a temporary Prometheus and serve it until Ctrl-C."""
    from herdsim.outputs import prometheus_server

    at = None if start is None else parse_start(start)
    console.print("exporting, backfilling and starting Prometheus…")
    for signum in (signal.SIGTERM, signal.SIGHUP):  # a kill or a closed terminal cleans up
        signal.signal(signum, _terminate)           # like Ctrl-C (HUP must not just reload)
    try:
        with prometheus_server.serve(directory, port, at, parse_interval(interval),
                                     replication) as running:
            begin, end = (datetime.fromtimestamp(running.export.start),
                          datetime.fromtimestamp(running.export.end))
            console.print(f"Prometheus over {safe(directory)}: [bold]{running.url}[/] "
                          f"(data from {begin:%H:%M:%S} to {end:%H:%M:%S})")
            console.print(f"the brief's query, per arm: {running.graph_url()}", highlight=False,
                          soft_wrap=True)
            console.print("Ctrl-C stops it and deletes its data.")
            code = running.process.wait()
        err_console.print(f"prometheus exited by itself with code {code}")
        raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("stopped Prometheus and deleted its data")


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt

"""The ``herdsim`` command line: a thin face over the Python API."""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from . import prometheus as promexport
from . import strategies
from .errors import ScenarioError
from .scenario import Scenario, load_scenario
from .simulation import run as run_scenario

app = typer.Typer(
    help="herdsim: simulate retry storms (the thundering herd) before production does.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.", show_default=False)]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a field: --set retry.strategy=full_jitter (repeatable)."),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", help="Output directory (default runs/<name>-<time>).")
]
PrometheusOpt = Annotated[
    bool, typer.Option("--prometheus", help="Also write metrics.om (see 'export prometheus').")
]


class UsageError(Exception):
    """A mistake on the command line (not in the scenario)."""


def friendly_errors(func):
    """Turn a user's mistake into one clear line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (ScenarioError, UsageError, FileExistsError) as exc:
            for line in str(exc).splitlines():
                err_console.print(f"[bold red]error:[/] {line}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err_console.print("interrupted: nothing was written")
            raise typer.Exit(130) from None

    return wrapper


def parse_sets(sets: list[str] | None) -> dict[str, str]:
    """``["a.b=1", ...]`` -> ``{"a.b": "1"}``; a malformed item is a :class:`UsageError`."""
    overrides = {}
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected path.to.field=value")
        overrides[key.strip()] = value
    return overrides


def load(path: Path, sets: list[str] | None) -> Scenario:
    return load_scenario(path, parse_sets(sets))


def output_dir(out: Path | None, name: str) -> Path:
    """The run's output directory: *out*, or ``runs/<name>-<timestamp>``; must not exist."""
    if out is None:
        out = Path("runs") / f"{name}-{datetime.now():%Y%m%d-%H%M%S}"
    if out.exists():
        raise FileExistsError(f"{out}: already exists; choose another --out or remove it")
    return out


def _fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


SUMMARY_ROWS = [
    ("jobs_submitted", "jobs submitted", ""),
    ("jobs_succeeded", "succeeded", ""),
    ("jobs_dead_lettered", "dead-lettered", ""),
    ("jobs_pending", "pending at the end", ""),
    ("attempts_total", "downstream calls", ""),
    ("amplification", "amplification", "calls/job"),
    ("capacity_rate", "downstream capacity", "calls/s"),
    ("peak_attempt_rate", "peak call rate", "calls/s"),
    ("peak_to_capacity", "peak / capacity", "×"),
    ("retry_peak_to_mean", "retry peak / mean", "×"),
    ("collapses", "collapses (crashes)", ""),
    ("collapses_after_outage", "collapses after the outage", ""),
    ("recovery_time", "recovery time", "s"),
    ("latency_p50", "latency p50", "s"),
    ("latency_p99", "latency p99", "s"),
    ("wall_seconds", "wall time", "s"),
]


def summary_table(summary: dict, title: str) -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("KPI")
    table.add_column("value", justify="right")
    table.add_column("unit")
    for key, label, unit in SUMMARY_ROWS:
        value = summary.get(key)
        if key == "recovery_time" and value is None:
            table.add_row(label, "[red]never[/]", "")
            continue
        table.add_row(label, _fmt(value), unit)
    return table


@app.command()
@friendly_errors
def run(scenario: ScenarioArg, set_: SetOpt = None, out: OutOpt = None,
        prometheus: PrometheusOpt = False) -> None:
    """Run one scenario, print its summary, and write its outputs to --out."""
    sc = load(scenario, set_)
    target = output_dir(out, sc.name)
    with console.status(f"simulating {sc.name} ({sc.duration:g} s of traffic)…"):
        result = run_scenario(sc)
    result.save(target)
    console.print(summary_table(result.summary, f"{sc.name} — {sc.retry.strategy}"))
    console.print(f"outputs: [bold]{target}[/]")
    if prometheus:
        report_export(promexport.export(target))


@app.command()
@friendly_errors
def validate(scenario: ScenarioArg, set_: SetOpt = None) -> None:
    """Check a scenario file and print it fully resolved (defaults filled in)."""
    sc = load(scenario, set_)
    console.print(f"[green]ok[/]: {scenario} is a valid scenario")
    console.print(sc.to_yaml(), highlight=False, markup=False)


@app.command("strategies")
def list_strategies() -> None:
    """List the built-in and installed backoff strategies with their formulas."""
    table = Table(show_header=True, header_style="bold")
    table.add_column("strategy")
    table.add_column("sleep before retry number attempt+1 (attempt 0 = first retry)")
    for name, formula in strategies.available().items():
        table.add_row(name, formula)
    console.print(table)
    console.print("A strategy of your own: retry.strategy: package.module:ClassName, or an "
                  "entry point in the 'herdsim.strategies' group.")


export_app = typer.Typer(help="Export a run's outputs for other tools.", no_args_is_help=True)
app.add_typer(export_app, name="export")
RunDirArg = Annotated[Path, typer.Argument(help="Output directory of 'herdsim run' or "
                                                "'herdsim compare'.", show_default=False)]
StartOpt = Annotated[str | None, typer.Option(
    "--start", help="Unix time (s) or ISO date-time of the run's t=0 "
                    "(default: now minus the run's duration).", show_default=False)]
IntervalOpt = Annotated[str | None, typer.Option(
    "--interval", help="Sample every … (a multiple of the bin, e.g. 1s; default: the bin).",
    show_default=False)]
ReplicationOpt = Annotated[int, typer.Option(
    "--replication", help="Which replication of a comparison to export.")]


def report_export(exported: promexport.Export) -> None:
    span = f"{datetime.fromtimestamp(exported.start):%Y-%m-%d %H:%M:%S} to " \
           f"{datetime.fromtimestamp(exported.end):%H:%M:%S}"
    console.print(f"wrote {exported.samples:,} samples of {exported.series} series "
                  f"({span}) to [bold]{exported.path}[/]")
    console.print(f"load it with: promtool tsdb create-blocks-from openmetrics "
                  f"{exported.path} DATA_DIR", highlight=False, soft_wrap=True)


@export_app.command("prometheus")
@friendly_errors
def export_prometheus(
    directory: RunDirArg, out: Annotated[Path | None, typer.Option(
        "--out", help="File to write (default: DIR/metrics.om).", show_default=False)] = None,
    start: StartOpt = None, interval: IntervalOpt = None,
    buckets: Annotated[str, typer.Option(
        "--buckets", help="Histogram bucket bounds, comma-separated (s or 250ms).")] =
        ",".join(f"{b:g}" for b in promexport.DEFAULT_BUCKETS),
    replication: ReplicationOpt = 0,
) -> None:
    """Write the run's metrics as OpenMetrics text for promtool's backfill."""
    report_export(promexport.export(
        directory, out, None if start is None else promexport.parse_start(start), interval,
        promexport.parse_buckets(buckets), replication))


@app.command("prometheus")
@friendly_errors
def prometheus_server(
    directory: RunDirArg,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 9090,
    start: StartOpt = None, interval: IntervalOpt = None, replication: ReplicationOpt = 0,
) -> None:
    """Backfill a run into a temporary Prometheus and serve it until Ctrl-C."""
    at = None if start is None else promexport.parse_start(start)
    console.print("exporting, backfilling and starting Prometheus…")
    try:
        with promexport.serve(directory, port, at, interval, replication) as running:
            begin, end = (datetime.fromtimestamp(running.export.start),
                          datetime.fromtimestamp(running.export.end))
            console.print(f"Prometheus over {directory}: [bold]{running.url}[/] "
                          f"(data from {begin:%H:%M:%S} to {end:%H:%M:%S})")
            console.print(f"the seed's query: {running.graph_url()}", highlight=False,
                          soft_wrap=True)
            console.print("Ctrl-C stops it and deletes its data.")
            code = running.process.wait()
        err_console.print(f"prometheus exited by itself with code {code}")
        raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("stopped Prometheus and deleted its data")


def main() -> None:  # pragma: no cover - console-script shim for python -m
    app(prog_name="herdsim")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

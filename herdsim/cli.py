"""The ``herdsim`` command line: a thin face over the Python API."""

from __future__ import annotations

import functools
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import prometheus as promexport
from . import strategies
from .compare import FORMATS, TABLE_KPIS, Comparison, OutputDirError, redraw, save_run
from .compare import compare as compare_arms
from .errors import ScenarioError
from .report import write_report
from .scenario import Scenario, load_scenario
from .simulation import run as run_scenario

app = typer.Typer(
    help="herdsim: simulate retry storms (the thundering herd) before production does.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(width=None if sys.stdout.isatty() else 120)  # pipes: wide, no wrapping
err_console = Console(stderr=True, emoji=False)

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
        except (ScenarioError, UsageError, FileExistsError, OutputDirError) as exc:
            for line in str(exc).splitlines():
                err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False,
                                  soft_wrap=True)
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
    try:
        overrides = parse_sets(sets)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return load_scenario(path, overrides)


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
    ("rejected_total", "calls rejected at once", ""),
    ("timeouts_total", "client timeouts", ""),
    ("errors_total", "error responses", ""),
    ("wasted_total", "wasted (served after timeout)", ""),
    ("recycled_total", "recycled (no DLQ)", ""),
    ("calls_avoided", "calls short-circuited", ""),
    ("budget_refused_total", "retries refused by budget", ""),
    ("recovery_time", "recovery time", "s"),
    ("latency_p50", "latency p50", "s"),
    ("latency_p99", "latency p99", "s"),
    ("wall_seconds", "wall time", "s"),
]


OPTIONAL_ROWS = {"rejected_total", "timeouts_total", "errors_total", "wasted_total",
                 "recycled_total", "calls_avoided", "budget_refused_total"}  # shown when nonzero


def summary_table(summary: dict, title: str) -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("KPI")
    table.add_column("value", justify="right")
    table.add_column("unit")
    for key, label, unit in SUMMARY_ROWS:
        value = summary.get(key)
        if key in OPTIONAL_ROWS and not value:
            continue
        if key == "recovery_time" and value is None:
            shown = "[red]never[/]" if summary.get("outages") else "no outage"
            table.add_row(label, shown, "")
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
    with console.status("writing outputs and timeline.png…"):
        save_run(result, target)
    console.print(summary_table(result.summary, f"{sc.name} — {sc.retry.strategy}"))
    console.print(f"outputs: [bold]{target}[/]", soft_wrap=True)
    if prometheus:
        report_export(promexport.export(target))


StrategiesOpt = Annotated[str | None, typer.Option(
    "--strategies", help="Comma-separated strategies to compare (default: every built-in).",
    show_default=False)]
VaryOpt = Annotated[list[str] | None, typer.Option(
    "--vary", help="Try several values of a field: --vary breaker.enabled=false,true "
                   "(repeatable; arms are every strategy x every combination).")]
FormatOpt = Annotated[str, typer.Option(
    "--format", help="Figure formats, comma-separated: png, svg, pdf.")]
OutputDirArg = Annotated[Path, typer.Argument(
    help="Output directory of 'herdsim run' or 'herdsim compare'.", show_default=False)]


def parse_list(option: str, text: str | None) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; an empty list is a :class:`UsageError`."""
    items = [item.strip() for item in (text or "").split(",") if item.strip()]
    if text is not None and not items:
        raise UsageError(f"{option} {text!r}: expected a comma-separated list")
    return items


def parse_vary(items: list[str] | None) -> dict[str, list[str]]:
    """``["a.b=1,2"]`` -> ``{"a.b": ["1", "2"]}`` (values parsed later as YAML scalars)."""
    vary: dict[str, list[str]] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise UsageError(f"--vary {item!r}: expected path.to.field=value1,value2,...")
        if key.strip() in vary:
            raise UsageError(f"--vary {key.strip()}: given twice")
        vary[key.strip()] = parse_list(f"--vary {key.strip()}=", values)
    return vary


def parse_formats(text: str) -> list[str]:
    formats = parse_list("--format", text)
    wrong = [f for f in formats if f not in FORMATS]
    if wrong:
        raise UsageError(f"--format {','.join(wrong)}: choose among {', '.join(FORMATS)}")
    return formats


def ranked_table(comparison: Comparison) -> Table:
    reps = comparison.replications
    caption = "ranked by recovery time (never last), then peak / capacity"
    table = Table(title=f"{comparison.scenario.name}: {len(comparison.arms)} arms varying "
                        f"{comparison.varied}, {reps} replication{'s' * (reps > 1)} each",
                  caption=caption + ("; ± = 95% confidence interval" if reps > 1 else ""),
                  header_style="bold", box=box.SIMPLE_HEAD)
    frame = comparison.table().drop(columns=[heading for key, heading in TABLE_KPIS
                                             if key in ("amplification", "jobs_pending")])
    table.add_column("#", justify="right")
    table.add_column("arm", overflow="fold")
    for column in frame.columns[1:]:
        table.add_column(column.replace(" ", "\n"), justify="right")
    for rank, row in frame.iterrows():
        cells = ["[red]never[/]" if value == "never" else value.replace(" ±", "\n±")
                 for value in row]
        table.add_row(str(rank), *cells)
    return table


@app.command()
@friendly_errors
def compare(
    scenario: ScenarioArg, set_: SetOpt = None, strategies_: StrategiesOpt = None,
    vary: VaryOpt = None,
    replications: Annotated[int, typer.Option(
        "--replications", min=1, help="Runs per arm, seeds seed..seed+N-1 shared by all arms.")
    ] = 1,
    out: OutOpt = None, fmt: FormatOpt = "png,svg",
    report: Annotated[bool, typer.Option("--report", help="Also write report.html.")] = False,
    processes: Annotated[int | None, typer.Option(
        "--processes", min=1, help="Parallel processes (default: all cores).",
        show_default=False)] = None,
    prometheus: PrometheusOpt = False,
) -> None:
    """Run a scenario under several strategies (and settings) with common random numbers."""
    sc = load(scenario, set_)
    names = parse_list("--strategies", strategies_)
    formats = parse_formats(fmt)
    target = output_dir(out, f"{sc.name}-compare")
    comparison = compare_arms(sc, names, parse_vary(vary), replications, processes)
    with console.status("writing outputs and figures…"):
        comparison.save(target, formats, report=report)
    console.print(ranked_table(comparison))
    console.print(f"outputs: [bold]{target}[/]", soft_wrap=True)
    if prometheus:
        report_export(promexport.export(target))


@app.command()
@friendly_errors
def plot(directory: OutputDirArg, fmt: FormatOpt = "png,svg") -> None:
    """Redraw the figures of a run or compare directory (the map of a sweep directory)."""
    formats = parse_formats(fmt)
    with console.status("drawing…"):
        if (directory / "manifest.json").exists():  # a sweep directory
            written = sweep_map(directory, formats)
        else:
            written = redraw(directory, formats)
    console.print("wrote " + ", ".join(str(path) for path in written), soft_wrap=True)


@app.command()
@friendly_errors
def report(directory: OutputDirArg) -> None:
    """Write a self-contained report.html (scenario, KPI table, figures) into DIR."""
    with console.status("writing the report…"):
        path = write_report(directory)
    console.print(f"report: [bold]{path}[/]")


@app.command()
@friendly_errors
def validate(scenario: ScenarioArg, set_: SetOpt = None) -> None:
    """Check a scenario file and print it fully resolved (defaults filled in)."""
    sc = load(scenario, set_)
    console.print(f"[green]ok[/]: {scenario} is a valid scenario")
    console.print(sc.to_yaml(), highlight=False, markup=False, soft_wrap=True)


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
    signal.signal(signal.SIGTERM, _terminate)  # a kill cleans up like Ctrl-C
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


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


@app.command("sweep")
@friendly_errors
def sweep_command(
    scenario: ScenarioArg,
    grid: Annotated[list[str] | None, typer.Option(
        "--grid", help="A swept field: path=v1,v2,... or path=start:stop:n[:log] "
                       "(repeatable; e.g. downstream.outages.0.duration=1s:20s:5:log).")] = None,
    strategies_: Annotated[str | None, typer.Option(
        "--strategies", help="Comma-separated strategies (default: the scenario's).",
        show_default=False)] = None,
    replications: Annotated[int, typer.Option(
        "--replications", help="Runs per cell and strategy (seeds seed, seed+1, ...).")] = 1,
    set_: SetOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Output directory; the same command resumes it "
                      "(default runs/<name>-sweep-<digest>).", show_default=False)] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", envvar="HERDSIM_SCHEDULER",
        help="Run on Dask: tcp://HOST:8786, or 'local' for a LocalCluster.")] = None,
    processes: Annotated[int | None, typer.Option(
        "--processes", min=1, help="Local processes (default: every core; 1 = serial).",
        show_default=False)] = None,
    draw_map: Annotated[bool, typer.Option(
        "--map", help="Draw the metastability map to DIR/map.png.")] = False,
) -> None:
    """Run a scenario over a grid of settings x strategies x replications (resumable)."""
    from . import metastability, sweep
    from .parallel import ExecutorError

    arms = [s.strip() for s in (strategies_ or "").split(",") if s.strip()]
    try:
        plan = sweep.plan(scenario, grid or [], arms, replications, parse_sets(set_))
        target = out or plan.default_out()
        sweep.check(target, plan)
        console.print(f"sweep {plan.name}: {plan.n_tasks} tasks ({plan.n_cells} cells, "
                      f"{len(plan.strategies)} strategies, {replications} replications), "
                      f"{len(sweep.finished(target))} already done -> [bold]{target}[/]")
        try:
            sweep.run_sweep(plan, target, processes, scheduler)
        except KeyboardInterrupt:
            saved = len(sweep.finished(target))
            err_console.print(f"interrupted: {saved} of {plan.n_tasks} tasks are saved in "
                              f"{target}; rerun the same command to continue" if saved else
                              "interrupted: nothing was written")
            raise typer.Exit(130) from None
        counts = metastability.class_counts(target)
        table = Table(title="cells by class", header_style="bold")
        for column in ("strategy", *counts.columns):
            table.add_column(column, justify="left" if column == "strategy" else "right")
        for strategy, row in counts.iterrows():
            table.add_row(str(strategy), *(str(n) for n in row))
        console.print(table)
        written = [target / name for name in sweep.TABLES]
        if draw_map:
            written += metastability.save_map(target)
    except (sweep.SweepError, ExecutorError) as exc:
        raise UsageError(str(exc)) from None
    console.print("wrote " + ", ".join(str(path) for path in written), soft_wrap=True)


def sweep_map(directory: Path, formats: list[str]) -> list[Path]:
    """``herdsim plot`` of a sweep directory: its metastability map."""
    from .metastability import save_map
    from .sweep import SweepError

    try:
        return save_map(directory, formats)
    except SweepError as exc:
        raise UsageError(str(exc)) from None


@app.command("reproduce")
@friendly_errors
def reproduce_command(
    experiment: Annotated[str, typer.Argument(
        help="aws-2015, collapse or retries (see docs/validation.md).", show_default=False)],
    runs: Annotated[int | None, typer.Option(
        "--runs", min=1, help="Runs per point (default: the published number, 100 for "
                              "aws-2015; 10 for collapse, 5 for retries).", show_default=False)
    ] = None,
    out: OutOpt = None,
    processes: Annotated[int | None, typer.Option(
        "--processes", min=1, help="Parallel processes (default: all cores).",
        show_default=False)] = None,
    set_: SetOpt = None,
) -> None:
    """Rerun a published experiment: print its table, write CSV and figure to --out.

    --set changes the experiment's scenario (scenarios/NAME.yaml), e.g.
    --set downstream.overload.latency_model=at_start."""
    from .reproduce import EXPERIMENTS, reproduce

    if experiment not in EXPERIMENTS:
        raise UsageError(f"reproduce {experiment!r}: no such experiment; choose among "
                         + ", ".join(EXPERIMENTS))
    overrides = parse_sets(set_)
    target = output_dir(out, f"reproduce-{experiment}")
    try:
        result = reproduce(experiment, runs, processes, progress=True, overrides=overrides)
    except ScenarioError as exc:
        raise ScenarioError(exc.problems, f"scenarios/{experiment}.yaml") from None
    result.save(target)
    for title, frame in result.printed():
        table = Table(title=f"{title}: means over {result.runs_per_point} runs per point",
                      header_style="bold", box=box.SIMPLE_HEAD)
        for column in frame.columns:
            table.add_column(str(column).replace("_", "\n"), justify="right")
        for row in frame.itertuples(index=False):
            cells = [value.item() if hasattr(value, "item") else value for value in row]
            table.add_row(*(("yes" if v else "no") if isinstance(v, bool) else _fmt(v)
                            for v in cells))
        console.print(table)
    console.print(f"outputs: [bold]{target}[/]", soft_wrap=True)


def main() -> None:  # pragma: no cover - console-script shim for python -m
    app(prog_name="herdsim")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

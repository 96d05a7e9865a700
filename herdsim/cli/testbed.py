"""``herdsim serve`` and ``herdsim testbed``: the scenario's downstream, and the whole
scenario, for real. The testbed (aiohttp, redis) and the KPI tables are imported by these
two commands when they run: ``--help`` and every other command start as fast as before."""

from __future__ import annotations

import signal
from typing import Annotated

import typer
from rich.table import Table

from herdsim.cli.app import (
    ForceOpt,
    FormatOpt,
    JsonOpt,
    OutOpt,
    QuietOpt,
    ScenarioArg,
    SetOpt,
    app,
    console,
    emit_json,
    err_console,
    load,
    output_dir,
    parse_formats,
    safe,
)
from herdsim.config import bundled


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP stop like Ctrl-C: every child is stopped, the temp dir removed."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@app.command()
def serve(scenario: ScenarioArg, set_: SetOpt = None,
          port: Annotated[int, typer.Option(
              "--port", help="Port to listen on (1-65535; 0: one the system picks).")] = 8000,
          host: Annotated[str, typer.Option(
              "--host", help="Address to listen on: loopback unless you say otherwise "
              "(0.0.0.0 or :: for every interface).")] = "127.0.0.1") -> None:
    """Serve the scenario's downstream over HTTP until Ctrl-C: point your own client at it.

    POST /call is one call (200 served, 500 error, 503 down or waiting room full, 429
    rate limited, 504 past the client timeout); GET /metrics is Prometheus text. Outages
    are timed from the moment it listens."""
    from herdsim.testbed.emulates import check_supported
    from herdsim.testbed.server import WILDCARDS, listen_on, serve_forever

    host = listen_on(host, port)
    sc = load(scenario, set_)
    check_supported(sc, downstream_only=True, source=str(bundled.resolve(scenario)))
    _stop_on_signals()

    where = f" (listening on every interface, {host})" if host in WILDCARDS else ""

    def ready(url: str) -> None:
        console.print(f"{safe(sc.name)}'s downstream: [bold]{url}/call[/]{where} (metrics: "
                      f"{url}/metrics); outages from now; Ctrl-C stops it", soft_wrap=True)

    import asyncio  # not for the other commands' start

    try:
        asyncio.run(serve_forever(sc, host, port, ready))
    except KeyboardInterrupt:
        console.print("stopped")


@app.command()
def testbed(scenario: ScenarioArg, set_: SetOpt = None, out: OutOpt = None,
            processes: Annotated[int, typer.Option(
                "--processes", help="Worker processes the workers are spread over.")] = 2,
            prometheus: Annotated[bool, typer.Option(
                "--prometheus", help="A real Prometheus scrapes every process each second; "
                "the brief's PromQL query then runs on what it scraped (prometheus.json).")
            ] = False,
            runs: Annotated[int, typer.Option(
                "--runs", help="Real runs (seeds seed, seed+1, ...): the checks need the "
                "spread of at least 3 valid ones.")] = 5,
            dilate: Annotated[float, typer.Option(
                "--dilate", help="Run K times slower (every duration x K, every rate / K), "
                "reported in the scenario's units: less lateness on a loaded machine.")
            ] = 1.0,
            calibrate: Annotated[bool, typer.Option(
                "--calibrate", help="Measure the real per-attempt turnaround (every run's, "
                "also in turnaround.csv), simulate every seed with the "
                "workers.attempt_overhead it fits, and print both.")
            ] = False,
            json_: JsonOpt = False, quiet: QuietOpt = False, fmt: FormatOpt = "png",
            force: ForceOpt = False) -> None:
    """Run the scenario for real (Redis, an HTTP downstream, worker processes) and write
    its outputs as 'herdsim run' does, with the simulation beside it (sim_vs_real).

    Needs redis-server on PATH (and prometheus with --prometheus). The summary records the
    lateness measured; a run whose p99 lateness exceeds 5 ms is invalid (with the reason)
    and does not count. Exits 1 when fewer than 3 runs (or all of fewer) are valid, or a
    check disagrees: the testbed failed, not the command line (docs/validation.md)."""
    from herdsim.testbed import run as testbed_run
    from herdsim.testbed.emulates import check_supported

    formats = parse_formats(fmt)
    sc = load(scenario, set_)
    source = str(bundled.resolve(scenario))
    check_supported(sc, source=source)  # before anything is created or started
    target = output_dir(out, sc.name)
    _stop_on_signals()
    say = (lambda _line: None) if (quiet or json_) else (
        lambda line: err_console.print(line, highlight=False, soft_wrap=True))
    try:
        done = testbed_run.testbed(sc, target, processes, formats, say, prometheus=prometheus,
                                   source=source, force=force, runs=runs, dilate=dilate,
                                   calibrate_overhead=calibrate)
    except KeyboardInterrupt:
        err_console.print("interrupted: every testbed process stopped, nothing was written")
        raise typer.Exit(130) from None
    s = done.real.summary
    if json_:
        import json  # NaN (a run that did not recover) as null

        def records(frame) -> list:
            return json.loads(frame.to_json(orient="records"))

        emit_json({**s, "testbed_runs": records(done.runs),
                   "testbed_checks": records(done.table.dropna(subset=["agrees"])),
                   "testbed_judged": done.judged, "testbed_agrees": done.agrees,
                   "testbed_simulated_overhead": done.overhead})
    elif not quiet:
        _print(done, sc, target)
    if calibrate and not json_:
        _print_turnaround(done)
    if not done.agrees:
        raise typer.Exit(1)


def _print(done, sc, target) -> None:
    """The first run's summary, the table, every run's validity, the verdict."""
    from herdsim.cli.tables import summary_table
    from herdsim.testbed import agreement

    s = done.real.summary
    console.print(summary_table(s, f"{sc.name} — {sc.retry.strategy} (real)"))
    table = Table(show_header=True, header_style="bold", title="simulated and real")
    for column in ("KPI", "simulated", "real", "agrees"):
        table.add_column(column, justify="left" if column == "KPI" else "right")
    for row in done.table.to_dict("records"):
        key = row["kpi"]
        agrees = "" if row["agrees"] is None else ("yes" if row["agrees"] else "NO")
        table.add_row(row["label"], _cell(key, row["simulated"], done.sim.summary),
                      _cell(key, row["real"], s), agrees)
    console.print(table)
    k = s.get("testbed_dilation", 1)
    clock = f"; in the scenario's time: wall ÷ {k:g}" if k != 1 else ""
    for row in done.runs.to_dict("records"):
        verdict = ("valid: within the bound" if row["valid"]
                   else f"INVALID, not counted: {row['invalid_reason']}")
        console.print(f"seed {row['seed']}: lateness p99 {row['lateness_p99_ms']:.1f} ms "
                      f"(bound {s['lateness_bound_ms']:g} ms{clock}): {verdict}",
                      highlight=False)
    valid, runs = int(done.runs["valid"].sum()), len(done.runs)
    if not done.judged:
        console.print(f"[bold red]not judged[/]: {valid} of {runs} runs valid; the checks "
                      f"need {min(agreement.MIN_VALID, runs)} (try --dilate 2 on a loaded "
                      "machine)", highlight=False)
    elif done.table["agrees"].isna().all():
        console.print(f"the checks need the spread of {agreement.MIN_VALID} valid runs "
                      f"({valid} here): not judged (--runs 5)", highlight=False)
    elif done.agrees:
        console.print(f"the simulation agrees with the {valid} valid real runs")
    else:
        bad = done.table.loc[done.table["agrees"].eq(False), "kpi"].tolist()
        console.print(f"[bold red]the simulation disagrees[/] with the {valid} valid real "
                      f"runs on {', '.join(bad)}", highlight=False)
    if done.prometheus is not None:
        _print_scraped(done.prometheus, s)
    console.print(f"outputs: [bold]{safe(target)}[/]", soft_wrap=True)


def _print_turnaround(done) -> None:
    """The turnaround of the valid runs' attempts, by component, and its fit."""
    import pandas as pd

    from herdsim.testbed import calibrate

    attempts = calibrate.measured(done.turnaround)
    which = ("valid runs'" if attempts["valid"].any()
             else "runs' (none valid: the machine's lateness is in it)")
    table = Table(show_header=True, header_style="bold",
                  title=f"real per-attempt turnaround, every {which} attempt (ms)")
    rows = calibrate.summary(attempts)
    for column in rows.columns:
        table.add_column(column, justify="left" if column in ("attempts", "component")
                         else "right")
    for row in rows.to_dict("records"):
        table.add_row(*(f"{v:,.3f}" if isinstance(v, float) else f"{v}" for v in row.values()))
    console.print(table)
    fitted = done.overhead  # the fit of these attempts, which the simulation was given
    if fitted is not None:
        means = rows.set_index(["attempts", "component"])["mean_ms"]
        mean = {which: ("none" if pd.isna(v := means[(which, "turnaround")]) else
                        f"{v:.2f} ms") for which in ("first tries", "retries")}
        console.print("the simulation above was given its fit, one distribution for every "
                      f"attempt (mean here: first tries {mean['first tries']}, retries "
                      f"{mean['retries']}):\n"
                      + calibrate.snippet(fitted, len(attempts)), highlight=False,
                      soft_wrap=True, markup=False)


def _print_scraped(scraped: dict, summary: dict) -> None:
    """The brief's query on the live data, and the totals Prometheus scraped beside the
    run's own counts."""
    from herdsim.testbed import live

    top = live.peak(scraped)
    peak = ("no data" if top is None
            else f"peak {top[0]:,.1f} retries/s at t = {top[1]:g} s")
    console.print(f"Prometheus at {scraped['url']} (stopped) scraped every process every "
                  f"{scraped['scrape_interval']:g} s. {scraped['query']} over the run: "
                  f"{peak} (a 10 s window: the spike spread over 10 s)", highlight=False,
                  soft_wrap=True)
    final = scraped["final"]
    own = {"success": summary["jobs_succeeded"],
           "retry": summary["retries_total"] + (summary.get("recycled_total") or 0),
           "failed_dlq": summary["jobs_dead_lettered"]}
    console.print("last scraped worker_job_execution_total (the run's own count): " + ", ".join(
        f"{status} {final.get(status, 0):,.0f} ({own[status]:,})" for status in own),
        highlight=False, soft_wrap=True)


def _cell(key: str, value, summary: dict) -> str:
    from herdsim.analysis.kpis import show

    try:
        return show(key, value, summary)
    except KeyError:  # a check of its own (peak_after_outage), not a registry KPI
        return "n/a" if value is None else f"{value:,.0f}"

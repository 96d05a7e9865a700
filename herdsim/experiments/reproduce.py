"""Rerun the field's published experiments: ``herdsim reproduce aws-2015|collapse|retries``.

Each experiment starts from its bundled scenario (``scenarios/NAME.yaml``), runs every
point of its grid ``runs`` times (seeds ``seed``, ``seed + 1``, …, shared by all points:
common random numbers) in parallel, and returns a :class:`Reproduction`: ``table`` (one
row per point, means over the runs), ``runs`` (one row per run) and a two-panel figure.
``docs/validation.md`` sets the numbers beside the published claims.

- ``aws-2015``: the AWS Architecture Blog's "Exponential Backoff And Jitter" (2015):
  N clients contending on one row with optimistic concurrency (``herdsim/model/occ.py``).
- ``collapse``: the classic retry-collapse model (service time growing with
  concurrency, 3 s timeouts, 3 attempts, timed-out work still served) hit by a spike.
- ``retries``: open-loop clients whose calls fail independently with probability p,
  under no retries, 3 retries, a token-bucket retry budget and a retry circuit breaker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
import yaml

from herdsim.analysis.statistics import ci95
from herdsim.config import bundled
from herdsim.config.scenario import Breaker, load_scenario
from herdsim.errors import ScenarioError
from herdsim.experiments.design import replication_seed
from herdsim.experiments.parallel import imap_unordered
from herdsim.model import occ
from herdsim.model.recorder import Recorder
from herdsim.outputs.atomic import staged_dir
from herdsim.plots.figures import STYLE, Figure, strategy_color
from herdsim.policies.budget import PRESETS
from herdsim.results import result as results

AWS_CLIENTS = tuple(range(10, 200, 10))
AWS_STRATEGIES = ("exponential", "full_jitter", "equal_jitter", "decorrelated_jitter")

COLLAPSE_RATES = (20, 25, 30, 35, 40, 45, 50, 55, 60, 70, 80)
COLLAPSE_JITTER = {"retry.strategy": "full_jitter", "retry.base": "1s", "retry.cap": "20s"}
COLLAPSE_WINDOW = 30.0  # judged on the last 30 s of the run
RECOVERED = 0.9  # recovered: goodput over that window >= 90% of the offered rate
BISTABLE = (200 / 9, 200 / 3)  # the timeout's bounds on the two states (validation.md)

RETRY_ERROR_RATES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RETRY_ARMS: dict[str, dict[str, Any]] = {
    "no retries": {"retry.max_retries": 0},
    "3 retries": {},
    "token bucket": {"budget": {"kind": "token_bucket", "preset": "aws"}},
    "retry breaker": {"breaker": {"enabled": True, "scope": "pool", "retries_only": True}},
}
RETRY_WARMUP = 2.0  # jobs arriving before this (the budget still full) are not counted
RETRY_TAIL = 1.0  # nor those arriving in the error outage's last second (may end after it)


@dataclass
class Reproduction:
    """One experiment's results: ``table`` (the CSV), ``runs`` (one row per run) and
    ``figure``; ``series`` holds time series behind the figure, when it has any."""

    name: str
    runs_per_point: int
    table: pd.DataFrame
    runs: pd.DataFrame
    figure: Figure
    series: pd.DataFrame | None = None

    def printed(self) -> list[tuple[str, pd.DataFrame]]:
        """(title, frame) pairs as the CLI prints them: aws-2015 as a calls table and a
        time table with a column per strategy (``_jitter`` dropped from the names),
        retries with the 95% intervals beside the means."""
        if self.name == "retries":
            t = self.table
            return [("retries", pd.DataFrame({
                "arm": t["arm"], "p": t["error_rate"],
                "success": _with_ci(t["success"], t["success_ci"]),
                "success_theory": t["theory_success"].round(3),
                "calls/job": _with_ci(t["calls_per_job"], t["calls_ci"]),
                "calls_theory": t["theory_calls_per_job"].round(3)}))]
        if self.name != "aws-2015":
            return [(self.name, self.table.drop(columns="runs"))]
        names = self.table["strategy"].astype(str).str.replace("_jitter", "")
        wide = self.table.assign(strategy=names)
        return [(title, wide.pivot(index="clients", columns="strategy", values=column)
                 [names.unique()].rename_axis(columns=None).reset_index())
                for title, column in (("calls (writes the row receives)", "calls"),
                                      ("time until the last client is done (s)",
                                       "completion_time"))]

    def save(self, out: str | Path) -> Path:
        """Write NAME.csv, NAME-runs.csv (NAME-series.csv) and NAME.png into the new
        directory *out*; it appears only once everything is written."""
        with staged_dir(out) as staging:
            staging.mkdir()
            self.table.to_csv(staging / f"{self.name}.csv", index=False)
            self.runs.to_csv(staging / f"{self.name}-runs.csv", index=False)
            if self.series is not None:
                self.series.to_csv(staging / f"{self.name}-series.csv", index=False)
            self.figure.savefig(staging / f"{self.name}.png", format="png")
        return Path(out)


def _with_ci(mean: pd.Series, ci: pd.Series) -> pd.Series:
    return pd.Series([f"{m:.3f} ±{c:.3f}" if c == c else f"{m:.3f}"
                      for m, c in zip(mean, ci, strict=True)], index=mean.index)


def base_scenario(name: str, overrides: dict[str, Any] | None = None) -> dict:
    """The bundled scenario ``scenarios/NAME.yaml`` as plain data, with *overrides*
    (dotted paths, as ``--set`` takes them) applied and the result validated."""
    data = yaml.safe_load((bundled.directory() / f"{name}.yaml").read_text(encoding="utf-8"))
    return load_scenario(data, overrides).to_dict()


def _run_all(task: Callable[[Any], dict], args: list, processes: int | None,
             label: str | None) -> pd.DataFrame:
    rows = [row for _, row in imap_unordered(task, args, processes, label=label)]
    return pd.DataFrame(rows)


# -- aws-2015 ----------------------------------------------------------------------------


def _occ_task(arg: tuple[dict, int, str, int]) -> dict:
    data, clients, strategy, run = arg
    scenario = load_scenario(data, {"workers.count": clients, "retry.strategy": strategy,
                                    "seed": replication_seed(data["seed"], run)})
    recorder = Recorder()
    contention = occ.contend(scenario, recorder)
    done = contention.completion_time(recorder)
    return {"clients": clients, "strategy": strategy, "run": run,
            "calls": len(recorder.attempts), "completion_time": np.nan if done is None else done}


def aws_2015(runs: int = 100, clients: Sequence[int] = AWS_CLIENTS,
             strategies: Sequence[str] = AWS_STRATEGIES, processes: int | None = None,
             label: str | None = None, overrides: dict[str, Any] | None = None
             ) -> Reproduction:
    """Calls the row receives and time until the last client is done (s), per strategy
    and number of clients, averaged over *runs* runs (the blog: 100). *overrides* change
    the bundled scenario (dotted paths), in every experiment."""
    data = base_scenario("aws-2015", overrides)
    args = [(data, n, s, r) for n in clients for s in strategies for r in range(runs)]
    per_run = _run_all(_occ_task, args, processes, label)
    per_run["strategy"] = pd.Categorical(per_run["strategy"], categories=list(strategies))
    per_run = per_run.sort_values(["clients", "strategy", "run"], ignore_index=True)
    unfinished = per_run["completion_time"].isna()
    if unfinished.any():
        first = per_run[unfinished].iloc[0]
        raise RuntimeError(f"aws-2015: {unfinished.sum()} runs ended before every client "
                           f"was done (e.g. {first.strategy} with {first.clients} clients); "
                           "raise duration in scenarios/aws-2015.yaml")
    table = (per_run.groupby(["clients", "strategy"], observed=True)
             [["calls", "completion_time"]].mean().reset_index())
    return Reproduction("aws-2015", runs, table, per_run, _aws_figure(table))


def _aws_figure(table: pd.DataFrame) -> Figure:
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        calls, time = fig.subplots(1, 2)
        for strategy, rows in table.groupby("strategy", observed=True):
            style = {"color": strategy_color(str(strategy)), "lw": 2, "marker": "o", "ms": 4}
            calls.plot(rows["clients"], rows["calls"], label=strategy, **style)
            time.plot(rows["clients"], rows["completion_time"], label=strategy, **style)
        calls.set(title="Work: writes the row receives", xlabel="contending clients",
                  ylabel="calls (mean per run)")
        time.set(title="Time until the last client is done", xlabel="contending clients",
                 ylabel="seconds (mean per run)")
        calls.legend()
        fig.suptitle("Optimistic concurrency, one row (AWS Architecture Blog, 2015)")
    return fig


# -- collapse ------------------------------------------------------------------------------


def _collapse_task(arg: tuple[dict, float, bool, str, int]) -> dict:
    data, rate, spike, strategy, run = arg
    overrides: dict[str, Any] = {"workload.rate": rate,
                                 "seed": replication_seed(data["seed"], run)}
    if not spike:
        overrides["workload.spikes"] = []
    if strategy != data["retry"]["strategy"]:
        overrides.update(COLLAPSE_JITTER)
    result = results.run(load_scenario(data, overrides))
    ts = result.timeseries
    width = result.scenario.bin
    end = ts["time"] >= result.scenario.duration - COLLAPSE_WINDOW
    goodput = ts.loc[end, "success"].sum() / (end.sum() * width)
    row = {"rate": rate, "spike": spike, "strategy": strategy, "run": run,
           "goodput": goodput, "timeouts": ts.loc[end, "timeouts"].sum() / (end.sum() * width),
           "recovered": goodput >= RECOVERED * rate}
    if run == 0:
        row["series"] = ts[["time", "success", "timeouts"]].assign(
            success=ts["success"] / width, timeouts=ts["timeouts"] / width)
    return row


def collapse(runs: int = 10, rates: Sequence[float] = COLLAPSE_RATES,
             processes: int | None = None, label: str | None = None,
             overrides: dict[str, Any] | None = None) -> Reproduction:
    """Goodput and timeouts per second over the last 30 s, and the fraction of runs that
    recovered, per offered rate: with the spike and immediate retries, without the spike,
    and with the spike and the AWS SDK's standard backoff (full jitter, base 1 s, cap 20 s)."""
    data = base_scenario("collapse", overrides)
    fixed = data["retry"]["strategy"]
    arms = [(True, fixed), (False, fixed), (True, COLLAPSE_JITTER["retry.strategy"])]
    args = [(data, rate, spike, strategy, run)
            for rate in rates for spike, strategy in arms for run in range(runs)]
    per_run = _run_all(_collapse_task, args, processes, label)
    cells = per_run.pop("series")
    series = pd.concat(
        [cell.assign(rate=row.rate, spike=row.spike, strategy=row.strategy)
         for row, cell in zip(per_run.itertuples(), cells, strict=True)
         if isinstance(cell, pd.DataFrame)], ignore_index=True)
    per_run = per_run.sort_values(["rate", "spike", "strategy", "run"], ascending=[
        True, False, True, True], ignore_index=True)
    table = (per_run.groupby(["rate", "spike", "strategy"], sort=False)
             .agg(goodput=("goodput", "mean"), timeouts=("timeouts", "mean"),
                  recovered=("recovered", "mean"), runs=("run", "size")).reset_index())
    return Reproduction("collapse", runs, table, per_run, _collapse_figure(table, series),
                        series)


def _collapse_figure(table: pd.DataFrame, series: pd.DataFrame) -> Figure:
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        timeline, boundary = fig.subplots(1, 2)
        shown = [(40, True, "fixed"), (30, True, "fixed"), (40, True, "full_jitter"),
                 (50, True, "fixed")]
        for (rate, spike, strategy), ls in zip(shown, ("-", "--", ":", "-."), strict=True):
            rows = series[(series["rate"] == rate) & (series["spike"] == spike)
                          & (series["strategy"] == strategy)]
            if len(rows):
                smooth = rows["success"].rolling(5, min_periods=1).mean()
                timeline.plot(rows["time"], smooth, ls=ls, lw=2,
                              color=strategy_color(strategy), label=f"{rate:g}/s, {strategy}")
        timeline.axvspan(20, 25, color="0.55", alpha=0.3, lw=0)
        timeline.set(title="Goodput, first run, 5 s mean (grey: the 80/s spike)",
                     xlabel="time (s)", ylabel="successes per second")
        if timeline.lines:
            timeline.legend()
        arms = ((True, "fixed", "spike, immediate retries", "o", 0.02),
                (False, "fixed", "no spike, immediate retries", "s", 0.0),
                (True, "full_jitter", "spike, full jitter 1 s..20 s", "^", -0.02))
        for spike, strategy, text, marker, lift in arms:  # lifted apart: curves coincide
            rows = table[(table["spike"] == spike) & (table["strategy"] == strategy)]
            boundary.plot(rows["rate"], rows["recovered"] + lift, marker=marker, lw=2,
                          ls="-" if spike else "--", color=strategy_color(strategy), label=text)
        boundary.axvspan(100 / 3, 100, color="#E69F00", alpha=0.15, lw=0,
                         label="claimed vulnerable: 100/3 < λ < 100")
        for rate in BISTABLE:
            boundary.axvline(rate, color="black", ls=":", lw=1.5)
        boundary.plot([], [], color="black", ls=":", lw=1.5,
                      label="timeout bounds 200/9, 200/3 (validation.md)")
        boundary.set(title="Runs that recovered (goodput ≥ 90% of λ at the end)",
                     xlabel="offered rate λ (requests/s)", ylabel="fraction of runs",
                     ylim=(-0.08, 1.08))
        boundary.legend(fontsize=11)
        fig.suptitle("Retry collapse: service 1 s + 10 ms × concurrency, 3 s timeout, "
                     "3 attempts")
    return fig


# -- retries -------------------------------------------------------------------------------


def retry_theory(arm: str, p: float) -> tuple[float, float]:
    """(success fraction, calls per job) predicted for *arm* at failure probability *p*,
    with independent failures and up to 3 retries.

    No retries: 1 - p and 1; 3 retries: 1 - p^4 and 1 + p + p^2 + p^3. The AWS token
    bucket pays ``retry_cost`` per retry and earns ``success_refund`` per first-try success
    and a retry's cost back when that retry succeeds, so in steady state it affords
    r = refund (1 - p) / (cost p) retries per job; it binds when r < p + p^2 + p^3, and
    then success = (1 - p)(1 + r), calls = 1 + r. The retry breaker is taken as a switch:
    3 retries below its failure-rate threshold, none at or above it.
    """
    free = p + p**2 + p**3
    if arm == "no retries" or (arm == "retry breaker"
                               and p >= Breaker().failure_rate_threshold):
        return 1 - p, 1.0
    if arm == "token bucket" and p > 0:
        aws = PRESETS["aws"]
        afford = aws["success_refund"] * (1 - p) / (aws["retry_cost"] * p)
        if afford < free:
            return (1 - p) * (1 + afford), 1 + afford
    return 1 - p**4, 1 + free


def _retries_task(arg: tuple[dict, str, float, int]) -> dict:
    data, arm, p, run = arg
    overrides: dict[str, Any] = {**RETRY_ARMS[arm],
                                 "seed": replication_seed(data["seed"], run)}
    if p > 0:
        overrides["downstream.outages.0.error_rate"] = p
    else:
        overrides["downstream.outages"] = []
    result = results.run(load_scenario(data, overrides))
    jobs = result.jobs
    outages = result.scenario.downstream.outages
    stop = (outages[0].end if outages else result.scenario.duration) - RETRY_TAIL
    counted = jobs[(jobs["arrival"] >= RETRY_WARMUP) & (jobs["arrival"] < stop)]
    if (counted["outcome"] == "pending").any():
        raise RuntimeError("retries: a counted job did not end; lengthen RETRY_TAIL")
    return {"arm": arm, "error_rate": p, "run": run, "jobs": len(counted),
            "success": float((counted["outcome"] == "succeeded").mean()),
            "calls_per_job": float(counted["attempts"].mean())}


def retries(runs: int = 5, error_rates: Sequence[float] = RETRY_ERROR_RATES,
            arms: Sequence[str] = tuple(RETRY_ARMS), processes: int | None = None,
            label: str | None = None, overrides: dict[str, Any] | None = None
            ) -> Reproduction:
    """Success fraction and calls per job (the downstream's load over the offered load)
    per arm and failure probability, with 95% confidence intervals over the runs and
    the predictions of :func:`retry_theory`."""
    data = base_scenario("retries", overrides)
    args = [(data, arm, p, run) for arm in arms for p in error_rates for run in range(runs)]
    per_run = _run_all(_retries_task, args, processes, label)
    per_run = per_run.sort_values(["arm", "error_rate", "run"], ignore_index=True,
                                  key=_arm_order)
    grouped = per_run.groupby(["arm", "error_rate"], sort=False)
    table = grouped.agg(success=("success", "mean"), success_ci=("success", ci95),
                        calls_per_job=("calls_per_job", "mean"),
                        calls_ci=("calls_per_job", ci95), runs=("run", "size")).reset_index()
    theory = [retry_theory(arm, p) for arm, p in zip(table["arm"], table["error_rate"],
                                                      strict=True)]
    table["theory_success"] = [s for s, _ in theory]
    table["theory_calls_per_job"] = [c for _, c in theory]
    return Reproduction("retries", runs, table, per_run, _retries_figure(table))


def _arm_order(column: pd.Series) -> pd.Series:
    order = {arm: i for i, arm in enumerate(RETRY_ARMS)}
    return column.map(order) if column.name == "arm" else column


def _retries_figure(table: pd.DataFrame) -> Figure:
    colors = dict(zip(RETRY_ARMS, ("#999933", "#D55E00", "#0072B2", "#009E73"), strict=True))
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(14, 5.5), layout="constrained")
        success, load = fig.subplots(1, 2)
        for arm, rows in table.groupby("arm", sort=False):
            color = colors.get(str(arm), "black")
            for ax, column in ((success, "success"), (load, "calls_per_job")):
                ci = rows["success_ci" if column == "success" else "calls_ci"].fillna(0)
                ax.errorbar(rows["error_rate"], rows[column], yerr=ci, marker="o", ms=5,
                            lw=0, elinewidth=1.5, color=color, label=f"{arm} (simulated)")
                ax.plot(rows["error_rate"], rows[f"theory_{column}"], lw=1.5, color=color,
                        alpha=0.7, label=f"{arm} (theory)")
        success.set(title="Requests that succeed", xlabel="failure probability of a call p",
                    ylabel="fraction of requests")
        load.set(title="Load on the downstream", xlabel="failure probability of a call p",
                 ylabel="calls per request")
        load.legend(fontsize=10, ncols=2)
        fig.suptitle("Independent failures: 100 clients × 10 requests/s")
    return fig


EXPERIMENTS: dict[str, tuple[Callable[..., Reproduction], int]] = {
    "aws-2015": (aws_2015, 100),  # the blog's 100 runs per point
    "collapse": (collapse, 10),
    "retries": (retries, 5),
}


def reproduce(name: str, runs: int | None = None, processes: int | None = None,
              progress: bool = False, overrides: dict[str, Any] | None = None
              ) -> Reproduction:
    """Run experiment *name* (a key of :data:`EXPERIMENTS`) at full size, with its default
    number of runs per point unless *runs* is given; *overrides* change its scenario
    (``scenarios/NAME.yaml``) like ``--set``."""
    experiment, default_runs = EXPERIMENTS[name]
    try:
        return experiment(runs=runs or default_runs, processes=processes,
                          label=f"reproduce {name}" if progress else None, overrides=overrides)
    except ScenarioError as exc:
        raise ScenarioError(exc.problems, f"scenarios/{name}.yaml") from None

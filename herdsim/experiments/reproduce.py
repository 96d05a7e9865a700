"""Rerun the field's published experiments: ``herdsim reproduce aws-2015|collapse|retries|cache``.

Each experiment starts from its bundled scenario (``scenarios/NAME.yaml``), runs every
point of its grid ``runs`` times (seeds ``seed``, ``seed + 1``, …, shared by all points:
common random numbers) in parallel, and returns a :class:`Reproduction`: ``table`` (one
row per point), ``runs`` (one row per run) and a two-panel figure. ``docs/validation.md``
maps every line of the originals to the scenario and sets the numbers beside the
originals' own, run with ``benchmarks/originals.py``.

- ``aws-2015``: the AWS Architecture Blog's "Exponential Backoff And Jitter" (2015):
  N clients contending on one row with optimistic concurrency (``herdsim/model/downstream/occ.py``).
- ``collapse``: ``simple_collapse_sim/sim.py`` of github.com/mbrooker/simulator_example:
  open-loop clients, a server whose service time is fixed at its start (1 s + 10 ms ×
  concurrency), both network legs delayed, 3 s timeouts, 3 attempts, hit by a spike.
- ``retries``: ``retry_sim/`` of the same repository: 100 clients whose calls fail
  independently with probability p, under no retries, 3 retries, a per-client token
  bucket credited per first try and a per-client cumulative-ratio retry breaker.

- ``cache``: ``cache_sim/`` of the same repository, in its own module
  (:mod:`herdsim.experiments.reproduce_cache`).

Arms named in ``COLLAPSE_VARIATIONS`` and ``RETRY_VARIATIONS`` are herdsim's own, not the
originals'.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from herdsim.analysis.statistics import ci95, wilson95
from herdsim.config import bundled
from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.experiments.design import replication_seed
from herdsim.experiments.parallel import imap_unordered
from herdsim.model.downstream import occ
from herdsim.model.recorder import Recorder
from herdsim.outputs.atomic import staged_dir
from herdsim.plots import reproduce as plots
from herdsim.plots.figures import Figure
from herdsim.plots.style import save_figure
from herdsim.results import result as results

AWS_CLIENTS = tuple(range(10, 200, 10))
AWS_STRATEGIES = ("exponential", "full_jitter", "equal_jitter", "decorrelated_jitter")

COLLAPSE_RATES = (20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70)  # at 80/s the spike is no spike
# The original's ClientWithBackoffAndJitter: a 10 s backoff doubled before each draw,
# U(0, 20 s) then U(0, 40 s), is full jitter U(0, min(cap, base 2^n)) with base 20 s.
ORIGINAL_JITTER = {"retry.strategy": "full_jitter", "retry.base": "20s", "retry.cap": "40s"}
CONTINUOUS = {"downstream.overload.latency_model": "continuous"}
COLLAPSE_ARMS: dict[str, dict[str, Any]] = {
    "no backoff": {},  # the original's Client (scenarios/collapse.yaml as written)
    "original jitter": ORIGINAL_JITTER,  # its ClientWithBackoffAndJitter
    "no spike": {"workload.spikes": []},  # the same Client at the base rate only
    "no backoff, continuous": CONTINUOUS,
    "original jitter, continuous": {**ORIGINAL_JITTER, **CONTINUOUS},
    "full jitter 1 s..20 s": {"retry.strategy": "full_jitter", "retry.base": "1s",
                              "retry.cap": "20s"},
}
COLLAPSE_VARIATIONS = ("no backoff, continuous", "original jitter, continuous",
                       "full jitter 1 s..20 s")
COLLAPSE_WINDOW = 30.0  # judged on the last 30 s of the run
# Recovered: goodput over that window at least half the base rate. Runs are bimodal (near
# the rate or near 0); at 90% the Poisson noise of 30 s of arrivals alone would fail about
# 1 healthy run in 100 at 20/s.
RECOVERED = 0.5

# retry_sim's run_sims grid (0.75 is written between 0.05 and 0.1) and 0.075 beside it.
RETRY_ERROR_RATES = (0.0, 0.001, 0.005, 0.01, 0.02, 0.0325, 0.05, 0.075, 0.1, 0.2, 0.3,
                     0.4, 0.5, 0.75)
BUCKET_REFUND = 0.1  # AdaptiveRetryFactory(0.1, 5): tokens per first try
BREAKER_RATIO = 0.1  # CircuitBreakerRetryFactory(NRetriesFactory(3), 0.1)
RETRY_ARMS: dict[str, dict[str, Any]] = {
    "no retries": {"retry.max_retries": 0},  # NRetriesFactory(0)
    "3 retries": {},  # NRetriesFactory(3) (scenarios/retries.yaml as written)
    "token bucket": {"retry.max_retries": None, "budget": {  # AdaptiveRetryFactory(0.1, 5)
        "kind": "token_bucket", "scope": "client", "credit_on": "first_try",
        "capacity": 5, "success_refund": BUCKET_REFUND, "retry_cost": 1, "timeout_cost": 1,
        "failure_cost": 0, "refund_retry_cost": False, "floor": 0, "strict": True}},
    "retry breaker": {"budget": {"kind": "cumulative_ratio", "ratio": BREAKER_RATIO,
                                 "scope": "client"}},
    "AWS SDK bucket, pooled": {"budget": {"kind": "token_bucket", "preset": "aws"}},
    "Resilience4j breaker, pooled": {"breaker": {"enabled": True, "scope": "pool",
                                                 "retries_only": True}},
}
RETRY_VARIATIONS = ("AWS SDK bucket, pooled", "Resilience4j breaker, pooled")
RETRY_DRAIN = 1.0  # requests arriving in the run's last second are not counted: the
# counted ones (10 s of them, retry_sim's max_t) end in it, as the original drains
RETRY_FIRST_TRIES = 100.0  # requests per client in those 10 s (10/s)


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
    shown: list[tuple[str, pd.DataFrame]] | None = None  # its printed tables, made with it

    def printed(self) -> list[tuple[str, pd.DataFrame]]:
        """(title, frame) pairs as the CLI prints them: aws-2015 as a calls table and a
        time table with a column per strategy (``_jitter`` dropped from the names),
        collapse with the runs that recovered and their 95% Wilson interval, retries with
        the 95% intervals beside the means; an experiment that made its own, those."""
        if self.shown is not None:
            return self.shown
        if self.name == "retries":
            t = self.table
            return [("retries", pd.DataFrame({
                "arm": t["arm"], "p": t["error_rate"],
                "success": _with_ci(t["success"], t["success_ci"]),
                "success_theory": t["theory_success"].round(3),
                "calls/job": _with_ci(t["calls_per_job"], t["calls_ci"]),
                "calls_theory": t["theory_calls_per_job"].round(3)}))]
        if self.name == "collapse":
            t = self.table
            return [("collapse", pd.DataFrame({
                "rate": t["rate"], "arm": t["arm"], "goodput": t["goodput"].round(1),
                "timeouts": t["timeouts"].round(1),
                "recovered": [f"{k}/{n} [{low:.2f}, {high:.2f}]" for k, n, low, high in zip(
                    t["recovered"], t["runs"], t["recovered_low"], t["recovered_high"],
                    strict=True)]}))]
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
            save_figure(self.figure, staging / f"{self.name}.png", "png")
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
        raise ScenarioError([("duration", f"{unfinished.sum()} runs ended before every client "
                               f"was done (e.g. {first.strategy} with {first.clients} "
                               "clients); lengthen the run")], source="aws-2015")
    table = (per_run.groupby(["clients", "strategy"], observed=True)
             [["calls", "completion_time"]].mean().reset_index())
    return Reproduction("aws-2015", runs, table, per_run, plots.aws_2015(table))


# -- collapse ------------------------------------------------------------------------------


def _collapse_task(arg: tuple[dict, float, str, int]) -> dict:
    data, rate, arm, run = arg
    overrides = {**COLLAPSE_ARMS[arm], "workload.rate": rate,
                 "seed": replication_seed(data["seed"], run)}
    result = results.run(load_scenario(data, overrides))
    ts = result.timeseries
    width = result.scenario.bin
    end = ts["time"] >= result.scenario.duration - COLLAPSE_WINDOW
    goodput = ts.loc[end, "success"].sum() / (end.sum() * width)
    row = {"rate": rate, "arm": arm, "run": run, "goodput": goodput,
           "timeouts": ts.loc[end, "timeouts"].sum() / (end.sum() * width),
           "recovered": bool(goodput >= RECOVERED * rate)}
    if run == 0:
        row["series"] = ts[["time", "success", "timeouts"]].assign(
            success=ts["success"] / width, timeouts=ts["timeouts"] / width)
    return row


def collapse(runs: int = 20, rates: Sequence[float] = COLLAPSE_RATES,
             arms: Sequence[str] = tuple(COLLAPSE_ARMS), processes: int | None = None,
             label: str | None = None, overrides: dict[str, Any] | None = None
             ) -> Reproduction:
    """Goodput and timeouts per second over the last 30 s, and the runs that recovered
    (with the 95% Wilson interval of their fraction), per base rate and arm: the
    original's two clients hit by its spike, the no-spike control, and herdsim's own
    variations (:data:`COLLAPSE_VARIATIONS`)."""
    data = base_scenario("collapse", overrides)
    args = [(data, rate, arm, run) for rate in rates for arm in arms for run in range(runs)]
    per_run = _run_all(_collapse_task, args, processes, label)
    cells = per_run.pop("series")
    series = pd.concat(
        [cell.assign(rate=row.rate, arm=row.arm)
         for row, cell in zip(per_run.itertuples(), cells, strict=True)
         if isinstance(cell, pd.DataFrame)], ignore_index=True)
    order = {arm: i for i, arm in enumerate(arms)}
    per_run = per_run.sort_values(["rate", "arm", "run"], ignore_index=True,
                                  key=lambda c: c.map(order) if c.name == "arm" else c)
    table = (per_run.groupby(["rate", "arm"], sort=False)
             .agg(goodput=("goodput", "mean"), timeouts=("timeouts", "mean"),
                  recovered=("recovered", "sum"), runs=("run", "size")).reset_index())
    bounds = [wilson95(int(k), int(n)) for k, n in zip(table["recovered"], table["runs"],
                                                        strict=True)]
    table["recovered_low"] = [low for low, _ in bounds]
    table["recovered_high"] = [high for _, high in bounds]
    spike = data["workload"]["spikes"][0]
    figure = plots.collapse(
        table, series, arms, COLLAPSE_VARIATIONS,
        shown=[(40, "no backoff"), (30, "no backoff"), (40, "original jitter"),
               (40, "no backoff, continuous")],
        spike=(spike["at"], spike["at"] + spike["duration"]), recovered=RECOVERED,
        window=COLLAPSE_WINDOW,
        title="Retry collapse as simple_collapse_sim runs it (1 s + 10 ms × concurrency)")
    return Reproduction("collapse", runs, table, per_run, figure, series)


# -- retries -------------------------------------------------------------------------------


def retry_theory(arm: str, p: float, first_tries: float = RETRY_FIRST_TRIES
                 ) -> tuple[float, float]:
    """(success fraction, calls per request) expected in steady state for *arm* at failure
    probability *p*, with independent failures; *first_tries* is the number of requests
    one client makes in a run (the initial tokens are spread over them).

    No retries: 1 - p and 1; 3 retries: 1 - p^4 and 1 + p + p^2 + p^3. The token bucket
    (no retry limit) would retry p / (1 - p) times per request; it earns 0.1 per request
    and starts with 5 tokens, of which about 4.5 are spent (a retry needs more than 1 and
    takes 1, so about half a token is left), so it affords r = 0.1 + 4.5 / first_tries
    retries per request; bound, success = (1 - p)(1 + r) and calls = 1 + r. The
    cumulative-ratio breaker lets every retry through while the failed calls per request,
    p + p^2 + p^3 + p^4, stay within 0.1; above, it holds them at 0.1 while first tries
    alone fail less often than that (calls 0.1 / p, success 0.1 (1 - p) / p), and lets
    none through once p > 0.1. The early runs of a client, where few requests make the
    ratio jumpy, are not in these formulas.
    """
    retried = p + p**2 + p**3
    if arm == "no retries" or (arm == "retry breaker" and p > BREAKER_RATIO):
        return 1 - p, 1.0
    if arm == "token bucket":
        afford = BUCKET_REFUND + 4.5 / first_tries
        wanted = p / (1 - p) if p < 1 else math.inf
        if wanted <= afford:
            return 1.0, 1 + wanted
        return (1 - p) * (1 + afford), 1 + afford
    if arm == "retry breaker" and p * (1 + retried) > BREAKER_RATIO:
        return BREAKER_RATIO * (1 - p) / p, BREAKER_RATIO / p
    return 1 - p**4, 1 + retried


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
    counted = jobs[jobs["arrival"] < result.scenario.duration - RETRY_DRAIN]
    if (counted["outcome"] == "pending").any():
        raise ScenarioError([("duration", "a counted request did not end; lengthen the run")],
                            source="retries")
    return {"arm": arm, "error_rate": p, "run": run, "jobs": len(counted),
            "success": float((counted["outcome"] == "succeeded").mean()),
            "calls_per_job": float(counted["attempts"].mean())}


def retries(runs: int = 5, error_rates: Sequence[float] = RETRY_ERROR_RATES,
            arms: Sequence[str] = tuple(RETRY_ARMS), processes: int | None = None,
            label: str | None = None, overrides: dict[str, Any] | None = None
            ) -> Reproduction:
    """Success fraction and calls per request (the downstream's load over the offered
    load) per arm and failure probability, with 95% confidence intervals over the runs
    and the steady-state expectations of :func:`retry_theory`."""
    data = base_scenario("retries", overrides)
    args = [(data, arm, p, run) for arm in arms for p in error_rates for run in range(runs)]
    per_run = _run_all(_retries_task, args, processes, label)
    order = {arm: i for i, arm in enumerate(arms)}
    per_run = per_run.sort_values(["arm", "error_rate", "run"], ignore_index=True,
                                  key=lambda c: c.map(order) if c.name == "arm" else c)
    grouped = per_run.groupby(["arm", "error_rate"], sort=False)
    table = grouped.agg(success=("success", "mean"), success_ci=("success", ci95),
                        calls_per_job=("calls_per_job", "mean"),
                        calls_ci=("calls_per_job", ci95), runs=("run", "size")).reset_index()
    per_client = ((data["duration"] - RETRY_DRAIN) * data["workload"]["rate"]
                  / data["workers"]["clients"])
    theory = [retry_theory(arm, p, per_client) if arm not in RETRY_VARIATIONS
              else (float("nan"), float("nan"))
              for arm, p in zip(table["arm"], table["error_rate"], strict=True)]
    table["theory_success"] = [s for s, _ in theory]
    table["theory_calls_per_job"] = [c for _, c in theory]
    figure = plots.retries(table, arms, "Independent failures as retry_sim: 100 clients × "
                                        "10 requests/s, each its own budget")
    return Reproduction("retries", runs, table, per_run, figure)


EXPERIMENTS: dict[str, tuple[Callable[..., Reproduction] | str, int]] = {
    "aws-2015": (aws_2015, 100),  # the blog's 100 runs per point
    "collapse": (collapse, 20),
    "retries": (retries, 5),
    # an experiment in a module of its own, loaded when run ("module:function")
    "cache": ("herdsim.experiments.reproduce_cache:cache_sim", 20),
}
SCENARIOS = {"cache": "cache_sim"}  # an experiment whose scenario is not scenarios/NAME.yaml


def reproduce(name: str, runs: int | None = None, processes: int | None = None,
              progress: bool = False, overrides: dict[str, Any] | None = None
              ) -> Reproduction:
    """Run experiment *name* (a key of :data:`EXPERIMENTS`) at full size, with its default
    number of runs per point unless *runs* is given; *overrides* change its scenario
    (``scenarios/NAME.yaml``) like ``--set``."""
    experiment, default_runs = EXPERIMENTS[name]
    if isinstance(experiment, str):
        module, _, function = experiment.partition(":")
        experiment = getattr(importlib.import_module(module), function)
    try:
        return experiment(runs=runs or default_runs, processes=processes,
                          label=f"reproduce {name}" if progress else None, overrides=overrides)
    except ScenarioError as exc:
        raise ScenarioError(exc.problems,
                            f"scenarios/{SCENARIOS.get(name, name)}.yaml") from None

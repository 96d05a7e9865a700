"""``herdsim reproduce cache``: Brooker's cold-start cache simulator
(``cache_sim/cache_sim.py`` of github.com/mbrooker/simulator_example), run as its
bundled scenario ``scenarios/cache_sim.yaml`` writes it, at each backend capacity of the
original (5, 10, 20 and 100 calls a second), held to the original's own numbers.

The original's numbers are stored with their provenance (commit, seeds, command) in
``herdsim/experiments/references/cache.json``, made by ``benchmarks/original_cache.py``,
which runs the unchanged original once per seed. Both sides are measured alike
(:func:`herdsim.analysis.cache.refill_time`): the seconds from the flush (4 s) to the end
of the first bin starting after it whose hit rate is back to 90% of the rate over the
first three seconds, and whether that happens by the end (60 s).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

import numpy as np
import pandas as pd

from herdsim.analysis import cache
from herdsim.analysis.statistics import ci95
from herdsim.config.loading import load_scenario
from herdsim.experiments.design import replication_seed
from herdsim.experiments.reproduce import Reproduction, _run_all, base_scenario
from herdsim.plots import reproduce as plots
from herdsim.results import result as results

CAPACITIES = (5, 10, 20, 100)  # backend_max_rate of the original's four runs
FLUSH, PRE_END = 4.0, 3.5  # the flush; the pre-flush rate is over the bins ending by 3.5 s
SCENARIO = "cache_sim"
# herdsim's mean refill time is held to the original's within this many standard errors
# of their difference (each side's spread over its seeds), plus one bin: the original's
# bins are 1.001 s long, herdsim's 1 s, so a bin's end differs by up to ~0.06 s by 60 s,
# and a crossing can fall one bin either way.
AGREE_SE, AGREE_BIN = 3.0, 1.0


def reference() -> dict:
    """The original's stored numbers (``references/cache.json``)."""
    text = files("herdsim.experiments").joinpath("references/cache.json").read_text("utf-8")
    return json.loads(text)


def _task(arg: tuple[dict, int, int]) -> dict:
    data, capacity, run = arg
    scenario = load_scenario(data, {"downstream.rate_limit.limit": capacity,
                                    "seed": replication_seed(data["seed"], run)})
    ts = results.run(scenario).timeseries
    width = scenario.bin
    hits, misses = ts[cache.HIT].to_numpy(), ts[cache.MISS].to_numpy()
    before = ts["time"].to_numpy() + width <= PRE_END
    row = {"capacity": capacity, "run": run,
           "pre_flush_hit_rate": float(hits[before].sum()
                                       / (hits[before].sum() + misses[before].sum())),
           "refill_time": cache.flush_refill(ts, FLUSH, width, pre_end=PRE_END),
           "last_hit_rate": float(cache.hit_rate(hits, misses)[-1])}
    row["series"] = pd.DataFrame({"time": ts["time"] + width,
                                  "hit_rate": cache.hit_rate(hits, misses)})
    return row


def agreement(herdsim_times: Sequence[float], original_times: Sequence[float]) -> float:
    """The largest difference of mean refill times the two sides' spreads allow:
    ``AGREE_SE`` standard errors of the difference of the means, plus ``AGREE_BIN``."""
    def var_of_mean(values: Sequence[float]) -> float:
        return float(np.var(values, ddof=1)) / len(values) if len(values) > 1 else 0.0
    return AGREE_SE * math.sqrt(var_of_mean(herdsim_times) + var_of_mean(original_times)) \
        + AGREE_BIN


def cache_sim(runs: int = 20, capacities: Sequence[int] = CAPACITIES,
              processes: int | None = None, label: str | None = None,
              overrides: dict[str, Any] | None = None) -> Reproduction:
    """Per backend capacity: herdsim's refill time (mean, 95% CI), its runs that refilled
    by 60 s, and the original's stored numbers beside them, with whether the means agree
    (:func:`agreement`)."""
    data = base_scenario(SCENARIO, overrides)
    args = [(data, c, r) for c in capacities for r in range(runs)]
    per_run = _run_all(_task, args, processes, label)
    cells = per_run.pop("series")
    series = pd.concat([cell.assign(capacity=row.capacity, run=row.run)
                        for row, cell in zip(per_run.itertuples(), cells, strict=True)],
                       ignore_index=True)
    per_run = per_run.sort_values(["capacity", "run"], ignore_index=True)
    ref = reference()
    original = {row["capacity"]: row for row in ref["summary"]}
    rows = []
    for capacity in capacities:
        mine = per_run[per_run["capacity"] == capacity]
        times = mine["refill_time"].dropna().astype(float)
        theirs = [r["refill_time"] for r in ref["runs"]
                  if r["capacity"] == capacity and r["refill_time"] is not None]
        orig = original.get(capacity, {})
        allowed = agreement(list(times), theirs) if len(times) and theirs else math.nan
        gap = abs(times.mean() - orig["refill_time_mean"]) if orig and len(times) else math.nan
        rows.append({
            "capacity": capacity, "runs": len(mine), "refilled": len(times),
            "refill_time": times.mean() if len(times) else math.nan,
            "refill_ci": ci95(times) if len(times) > 1 else math.nan,
            "pre_flush_hit_rate": mine["pre_flush_hit_rate"].mean(),
            "original_runs": orig.get("runs", 0), "original_refilled": orig.get("refilled", 0),
            "original_refill_time": orig.get("refill_time_mean", math.nan),
            "original_pre_flush_hit_rate": orig.get("pre_flush_hit_rate_mean", math.nan),
            "allowed_gap": allowed, "agrees": bool(gap <= allowed)})
    table = pd.DataFrame(rows)
    shown = [("cache (seconds to 90% of the pre-flush hit rate; original: "
              f"{ref['commit'][:7]}, {len(ref['seeds'])} seeds)", pd.DataFrame({
                  "backend/s": table["capacity"],
                  "refilled": [f"{k}/{n}" for k, n in zip(table["refilled"], table["runs"],
                                                          strict=True)],
                  "refill s": [f"{m:.1f} ±{c:.1f}" for m, c in zip(
                      table["refill_time"], table["refill_ci"], strict=True)],
                  "original refilled": [f"{k}/{n}" for k, n in zip(
                      table["original_refilled"], table["original_runs"], strict=True)],
                  "original s": table["original_refill_time"].round(1),
                  "pre-flush hit rate (original)": [
                      f"{m:.3f} ({o:.3f})" for m, o in zip(
                          table["pre_flush_hit_rate"], table["original_pre_flush_hit_rate"],
                          strict=True)],
                  "agrees": table["agrees"]}))]
    curves = {row["capacity"]: row["curve"] for row in ref["summary"]}
    figure = plots.cache(table, series, curves, FLUSH,
                         "Cold start after a cache flush, as cache_sim.py runs it "
                         "(Zipf 1.3, 1,000-entry LRU, 1,000 requests/s)")
    return Reproduction("cache", runs, table, per_run, figure, series, shown)

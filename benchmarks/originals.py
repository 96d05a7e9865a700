"""Run the originals (github.com/mbrooker/simulator_example) beside ``herdsim reproduce``.

    python benchmarks/originals.py collapse --side original --originals DIR --runs 100 \\
        --csv collapse-original.csv
    python benchmarks/originals.py collapse --side herdsim --runs 100 --csv collapse-herdsim.csv
    python benchmarks/originals.py table collapse-original.csv collapse-herdsim.csv

(``retries`` likewise.) DIR holds the originals' files as their repository lays them out:
``simple_collapse_sim/sim.py`` and ``retry_sim/{retry_sim,client,retry_strategy}.py``.
Their code is not part of herdsim and is never copied into it: this script loads it from
DIR, leaving out only the top-level calls at the end of each file (their main block), and
seeds Python's ``random`` with the run's index before each run.

The collapse runs use the original's classes wired as its ``run_sim_spike`` wires them
(the base rate a parameter; "no spike" sets the peak rate to the base rate). Its event loop
re-heapifies the whole queue after every event, O(n) per event, which makes a collapsed run
minutes long; :func:`pushing_loop` pushes instead. It pops the same events in the same
order (no two events share a time: a tie would compare two bound methods and raise
TypeError), so a run is unchanged; ``--check K`` reruns K seeds per arm with the
original's own loop and stops unless every per-second count is the same. The retry
experiment runs as written (its queue stays small).

A collapse run *recovered* when its goodput over the last 30 s is at least half the base
rate (herdsim's rule, ``herdsim.experiments.reproduce.RECOVERED``): runs are bimodal,
goodput either near the rate or near 0. The table gives, per arm and rate, the runs that
recovered with the 95% Wilson interval; for retries, success per request and calls per
request (the downstream's load over the offered load), means over the runs with 95%
t intervals.
"""

from __future__ import annotations

import argparse
import ast
import heapq
import random
import sys
import types
from pathlib import Path

import pandas as pd

from herdsim.analysis.statistics import ci95, wilson95
from herdsim.experiments import reproduce as rp

COLLAPSE_MAX_T = 80  # run_sim_spike's max_t
COLLAPSE_SPIKE = (80, 20, 5)  # run_sim_spike's peak_rate, spike_start, spike_width
RETRY_MAX_T = 10.0  # the max_t of the file's one top-level call
ORIGINAL_ARMS = {"collapse": ("no backoff", "original jitter", "no spike"),
                 "retries": ("no retries", "3 retries", "token bucket", "retry breaker")}
RETRY_ORIGINAL_RATES = (0.0, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                        0.0325, 0.05, 0.75, 0.1, 0.2, 0.3, 0.4, 0.5)  # run_sims, as written


def load(path: Path, name: str) -> types.ModuleType:
    """The module at *path* without its top-level expression statements (the calls that
    run the experiment when the file is executed)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    tree.body = [node for node in tree.body if not isinstance(node, ast.Expr)]
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - the point
    return module


def pushing_loop(max_t: float, q: list) -> None:
    """``sim_loop`` of simple_collapse_sim/sim.py, pushing new events instead of
    re-heapifying the queue after each."""
    t = 0.0
    heapq.heapify(q)
    while q and t < max_t:
        t, call, payload = heapq.heappop(q)
        new_events = call(t, payload)
        if new_events is not None:
            for event in new_events:
                heapq.heappush(q, event)


def _collapse_history(sim, rate: float, arm: str, seed: int) -> list:
    random.seed(seed)
    server = sim.Server()
    stats = sim.Stats(server, arm)
    client = sim.ClientWithBackoffAndJitter if arm == "original jitter" else sim.Client
    peak, start, width = COLLAPSE_SPIKE
    gen = sim.SpikeLoadGenerator(stats, server, client, rate,
                                 rate if arm == "no spike" else peak, start, width)
    sim.sim_loop(COLLAPSE_MAX_T, [(1.0, stats.print_stats, None), (0.01, gen.gen_load, None)])
    return stats.history


def _counts(history: list) -> list[tuple]:
    return [(d.start_t, d.starts, d.successes, d.retries, d.timeouts) for d in history]


def original_collapse(originals: Path, runs: int, rates, check: int,
                      sink: Path | None = None) -> pd.DataFrame:
    sim = load(originals / "simple_collapse_sim" / "sim.py", "original_collapse_sim")
    as_written = sim.sim_loop
    random.seed(0)
    reference = [(d.start_t, d.successes) for d in sim.run_sim_spike("check", sim.Client)]
    random.seed(0)
    mine = [(d.start_t, d.successes) for d in _collapse_history(sim, 40, "no backoff", 0)]
    if mine != reference:
        raise SystemExit("the wiring here differs from the original's run_sim_spike")
    rows = []
    for rate in rates:
        for arm in ORIGINAL_ARMS["collapse"]:
            point = []
            for run in range(runs):
                sim.sim_loop = pushing_loop
                history = _collapse_history(sim, rate, arm, run)
                if run < check:
                    sim.sim_loop = as_written
                    again = _collapse_history(sim, rate, arm, run)
                    if _counts(again) != _counts(history):
                        raise SystemExit(f"pushing_loop differs: {arm} {rate}/s seed {run}")
                window = [d for d in history if d.start_t >= COLLAPSE_MAX_T - rp.COLLAPSE_WINDOW]
                goodput = sum(d.successes for d in window) / len(window)
                point.append({"side": "original", "arm": arm, "rate": rate, "run": run,
                              "goodput": goodput, "recovered": goodput >= rp.RECOVERED * rate})
            _append(sink, point)
            rows += point
    return pd.DataFrame(rows)


def _append(sink: Path | None, rows: list[dict]) -> None:
    """Add one grid point's runs to the CSV *sink* as soon as they are done."""
    if sink is not None:
        pd.DataFrame(rows).to_csv(sink, mode="a", header=not sink.exists(), index=False)
    first = rows[0]
    print(f"{first['side']} {first['arm']} {first.get('rate', first.get('error_rate')):g}: "
          f"{len(rows)} runs done", file=sys.stderr)


def original_retries(originals: Path, runs: int, rates, sink: Path | None = None
                     ) -> pd.DataFrame:
    sys.path.insert(0, str(originals / "retry_sim"))  # retry_sim.py imports its siblings
    rs = load(originals / "retry_sim" / "retry_sim.py", "original_retry_sim")
    factories = {  # run_sims' four, with the arm names of herdsim reproduce retries
        "no retries": rs.NRetriesFactory(0),
        "3 retries": rs.NRetriesFactory(3),
        "token bucket": rs.AdaptiveRetryFactory(0.1, 5),
        "retry breaker": rs.CircuitBreakerRetryFactory(rs.NRetriesFactory(3), 0.1),
    }
    rows = []
    for p in rates:
        for arm, factory in factories.items():
            point = []
            for run in range(runs):
                random.seed(run)
                stats = rs.Stats(p, arm)
                server = rs.Server(p)
                clients = [rs.Client(factory.make(), 10.0, server, stats, 0.0)
                           for _ in range(100)]
                rs.sim_loop(clients, RETRY_MAX_T)
                point.append({"side": "original", "arm": arm, "error_rate": p, "run": run,
                              "jobs": stats.unique_calls,
                              "success": stats.successes / stats.unique_calls,
                              "calls_per_job": stats.total_calls / stats.unique_calls})
            _append(sink, point)
            rows += point
    return pd.DataFrame(rows)


def herdsim_runs(experiment: str, runs: int, grid, processes: int | None,
                 arms: tuple[str, ...] | None = None) -> pd.DataFrame:
    """herdsim's runs of *arms* (default: the arms the original has)."""
    arms = arms or ORIGINAL_ARMS[experiment]
    if experiment == "collapse":
        return rp.collapse(runs=runs, rates=grid, arms=arms, processes=processes).runs
    return rp.retries(runs=runs, error_rates=grid, arms=arms, processes=processes).runs


def table(frames: dict[str, pd.DataFrame]) -> str:
    """A markdown table: one row per grid point, a column per (side, arm)."""
    first = next(iter(frames.values()))
    collapse = "rate" in first.columns
    key = "rate" if collapse else "error_rate"
    cells: dict[tuple[str, str], dict[float, str]] = {}
    for side, frame in frames.items():
        for (arm, x), rows in frame.groupby(["arm", key], sort=False):
            if collapse:  # judged here, by the rule herdsim reproduce applies today
                k, n = int((rows["goodput"] >= rp.RECOVERED * x).sum()), len(rows)
                low, high = wilson95(k, n)
                text = f"{k}/{n} [{low:.2f}, {high:.2f}]"
            else:
                text = (f"{rows['success'].mean():.4f} ±{_half(rows['success'])} · "
                        f"{rows['calls_per_job'].mean():.4f} ±{_half(rows['calls_per_job'])}")
            cells.setdefault((side, str(arm)), {})[float(x)] = text
    columns = sorted(cells, key=lambda c: (c[1], c[0]))
    xs = sorted({x for column in cells.values() for x in column})
    lines = ["| " + key + " | " + " | ".join(f"{arm} ({side})" for side, arm in columns) + " |",
             "|---:|" + "---|" * len(columns)]
    for x in xs:
        lines.append(f"| {x:g} | " + " | ".join(cells[c].get(x, "") for c in columns) + " |")
    return "\n".join(lines)


def _half(values: pd.Series) -> str:
    half = ci95(values)
    return "nan" if half != half else f"{half:.4f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=("collapse", "retries", "table"))
    parser.add_argument("csvs", nargs="*", help="table: per-run CSVs written by --csv or "
                                                 "by herdsim reproduce (NAME-runs.csv)")
    parser.add_argument("--side", choices=("original", "herdsim"), default="original")
    parser.add_argument("--originals", type=Path, help="directory holding the originals")
    parser.add_argument("--runs", type=int, default=100, help="runs (seeds) per point")
    parser.add_argument("--grid", type=float, nargs="*",
                        help="rates (collapse) or failure probabilities (retries)")
    parser.add_argument("--check", type=int, default=2,
                        help="collapse: seeds per arm and rate rerun with the original loop")
    parser.add_argument("--processes", type=int, default=None, help="herdsim's processes")
    parser.add_argument("--arms", nargs="*", help="herdsim's arms (default: the original's)")
    parser.add_argument("--csv", type=Path, help="append the per-run rows to this CSV "
                                                 "(the originals' as each point ends)")
    args = parser.parse_args()
    if args.experiment == "table":
        frames: dict[str, list[pd.DataFrame]] = {}
        for path in args.csvs:  # per-run CSVs of either side, or herdsim reproduce's NAME-runs
            frame = pd.read_csv(path)
            side = frame["side"].iloc[0] if "side" in frame.columns else "herdsim"
            frames.setdefault(side, []).append(frame)
        merged = {side: pd.concat(parts).drop_duplicates(
            [c for c in ("arm", "rate", "error_rate", "run") if c in parts[0].columns])
            for side, parts in frames.items()}
        print(table(merged))
        return 0
    grid = args.grid or (rp.COLLAPSE_RATES if args.experiment == "collapse"
                         else RETRY_ORIGINAL_RATES)
    if args.side == "herdsim":
        frame = herdsim_runs(args.experiment, args.runs, grid, args.processes,
                             tuple(args.arms) if args.arms else None)
    elif args.originals is None:
        parser.error("--side original needs --originals DIR")
    elif args.experiment == "collapse":
        frame = original_collapse(args.originals, args.runs, grid, args.check, args.csv)
    else:
        frame = original_retries(args.originals, args.runs, grid, args.csv)
    if args.side == "herdsim":
        frame.insert(0, "side", "herdsim")
        if args.csv:
            frame.to_csv(args.csv, mode="a", header=not args.csv.exists(), index=False)
    print(table({args.side: frame}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

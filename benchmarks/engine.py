"""Engine benchmark: herdsim against a naive SimPy model of the same scenario.

    python benchmarks/engine.py                       # 10,000 workers, herdsim vs naive
    python benchmarks/engine.py --workers 100000 --duration 30s --no-naive   # memory check
    python benchmarks/engine.py --baseline /tmp/herdsim-base   # also an earlier herdsim
    python benchmarks/engine.py --tiers 3 --no-naive   # the downstream at the bottom of 3 tiers

The bundled ``scenarios/outage.yaml`` is scaled to ``--workers``: the arrival rate, the
downstream's slots, its waiting room and its crash threshold grow in proportion, so the
load (70% of capacity) and the story stay the same. The crash rule is switched off unless
``--collapse`` is given: the naive model has none, and with it the exponential herd spends
most of the run crashed, which would time arrivals rather than calls. ``--set`` overrides
any field of the scaled scenario (e.g. ``--set breaker.enabled=true``); the naive model
takes its parameters from the resolved scenario, so shared ones follow.

The naive model (``naive_model``) is the reference's: one process per worker,
``simpy.Store`` for the main queue, ``simpy.Resource`` for the downstream, a process per
call, exponential backoff slept in the worker, ``down`` outages, no metrics but a call
counter. herdsim runs in full: every series, sleep and job is recorded and binned, and its
wall time covers ``herdsim.run`` end to end (set-up, simulation, frames, summary).

``--tiers N`` (N >= 2) puts the scaled downstream at the bottom of a call graph of N
tiers (``tier1`` -> ... -> ``bottom``): each tier above has a slot per worker (it holds
it while its call runs), 1 ms of its own work (exponential) and calls the next with the
edge's 2 s timeout and up to 2 retries (exponential backoff); the workers' edge is the
scenario's. The calls counted are then the bottom tier's (``tiers.bottom.calls``), and
the naive model, which has no graph, is skipped.

``--baseline PATH`` adds a third row: the same scenario run by the herdsim package found
in PATH (a directory put first on ``PYTHONPATH``, e.g. an earlier release installed with
``pip install --target``), and prints this checkout's speed relative to it.

Each model runs in a fresh subprocess, so the peak RSS (that process's high-water mark,
imports included) is the model's own. ``--repeat N`` runs the models in turn N times and
keeps each one's fastest run by CPU seconds: on a shared machine they are the steadier
figure, and the ratios use them (wall seconds are printed beside).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "outage.yaml"
MIN_CALLS = 1_000_000
MEMORY_TARGET_MB = 800
SPEED_TARGET = 2.0


# -- the two models, each run in its own child process -------------------------------------


def peak_rss_mb() -> float:
    """Peak resident set size of this process image, in MiB.

    On Linux ``getrusage`` carries the parent's peak across fork and exec (a child of a
    200 MB parent reports at least 200 MB), so the kernel's ``VmHWM`` of this image is
    read instead; elsewhere ``getrusage`` is the measure.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**10  # KiB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def run_herdsim(spec: dict) -> dict:
    """Run the resolved scenario in *spec* with herdsim; calls, wall seconds, peak RSS."""
    import herdsim

    scenario = herdsim.load_scenario(spec["scenario"])
    started, cpu = time.perf_counter(), time.process_time()
    result = herdsim.run(scenario)
    tiers = result.summary.get("tiers")
    calls = tiers["bottom"]["calls"] if tiers else result.summary["attempts_total"]
    return {"calls": calls, "wall": time.perf_counter() - started,
            "cpu": time.process_time() - cpu, "rss_mb": peak_rss_mb()}


def naive_model(p: dict) -> int:
    """The naive SimPy model of a retry storm; returns the number of downstream calls."""
    import simpy

    rng = random.Random(p["seed"])
    env = simpy.Environment()
    jobs = simpy.Store(env)
    downstream = simpy.Resource(env, p["concurrency"])
    limit = math.inf if p["queue_limit"] is None else p["queue_limit"]
    max_retries = math.inf if p["max_retries"] is None else p["max_retries"]
    state = {"down": 0, "calls": 0}

    def producer():
        for _ in range(p["backlog"]):
            jobs.put(0.0)
        while True:
            yield env.timeout(rng.expovariate(p["rate"]))
            jobs.put(env.now)

    def call():
        state["calls"] += 1
        if state["down"] or len(downstream.queue) >= limit:
            return False
        with downstream.request() as slot:
            yield slot
            yield env.timeout(rng.expovariate(1.0 / p["service"]))
        return not state["down"]

    def worker():
        while True:
            yield jobs.get()
            attempt = 0
            while True:
                ok = yield env.process(call())
                if ok or attempt >= max_retries:
                    break
                yield env.timeout(min(p["cap"], p["base"] * 2**attempt))
                attempt += 1

    def outage(start, duration):
        yield env.timeout(start)
        state["down"] += 1
        yield env.timeout(duration)
        state["down"] -= 1

    env.process(producer())
    for start, duration in p["outages"]:
        env.process(outage(start, duration))
    for _ in range(p["workers"]):
        env.process(worker())
    env.run(until=p["duration"])
    return state["calls"]


def run_naive(spec: dict) -> dict:
    started, cpu = time.perf_counter(), time.process_time()
    calls = naive_model(spec["naive"])
    return {"calls": calls, "wall": time.perf_counter() - started,
            "cpu": time.process_time() - cpu, "rss_mb": peak_rss_mb()}


CHILDREN = {"herdsim": run_herdsim, "naive": run_naive, "baseline": run_herdsim}


# -- the parent: scale the scenario, run the children, print the table ---------------------


def scaled_scenario(workers: int, duration: str | None, collapse: bool, sets: list[str]):
    """``outage.yaml`` scaled to *workers* (rate, slots, waiting room, crash threshold)."""
    from herdsim import load_scenario

    bundled = load_scenario(SCENARIO)
    f = workers / bundled.workers.count
    ds = bundled.downstream
    overrides: dict = {
        "workers.count": workers,
        "workload.rate": bundled.workload.rate * f,
        "downstream.concurrency": max(1, round(ds.concurrency * f)),
    }
    if ds.queue_limit is not None:
        overrides["downstream.queue_limit"] = round(ds.queue_limit * f)
    crash = ds.overload.collapse
    if crash is not None and not collapse:
        overrides["downstream.overload.collapse"] = None
    elif crash is not None:
        for key in ("threshold", "load_limit"):
            if getattr(crash, key) is not None:
                overrides[f"downstream.overload.collapse.{key}"] = max(
                    1, round(getattr(crash, key) * f))
    if duration is not None:
        overrides["duration"] = duration
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected path.to.field=value")
        overrides[key.strip()] = value
    return load_scenario(SCENARIO, overrides)


def tiered(scenario: dict, tiers: int, workers: int) -> dict:
    """*scenario* (plain data) with its downstream at the bottom of *tiers* tiers."""
    bottom = dict(scenario.get("downstream", {}))
    timeout = bottom.pop("timeout", None)
    bottom.pop("model", None)
    edge = {"timeout": "2s", "retry": {"strategy": "exponential", "base": "100ms",
                                       "max_retries": 2}}
    names = [f"tier{k}" for k in range(1, tiers)] + ["bottom"]
    above = {"concurrency": workers, "service": {"mean": "1ms"}}
    services = {name: {**above, "calls": [{"service": nxt, **edge}]}
                for name, nxt in zip(names[1:-1], names[2:], strict=True)}
    services["bottom"] = bottom
    top = {**above, "name": names[0], "calls": [{"service": names[1], **edge}]}
    if timeout is not None:
        top["timeout"] = timeout
    return {**scenario, "downstream": top, "services": services}


def naive_params(sc) -> dict:
    """The parameters of *sc* the naive model understands."""
    ds = sc.downstream
    return {
        "workers": sc.workers.count, "rate": sc.workload.rate, "backlog": sc.workload.backlog,
        "concurrency": ds.concurrency, "service": ds.service.mean, "queue_limit": ds.queue_limit,
        "duration": sc.duration, "seed": sc.seed,
        "outages": [(o.start, o.duration) for o in ds.outages if o.mode == "down"],
        "base": sc.retry.base, "cap": sc.retry.cap, "max_retries": sc.retry.max_retries,
    }


def child(model: str, spec: dict) -> dict:
    """Run *model* once in a fresh interpreter and return what it measured."""
    env = dict(os.environ)
    if model == "baseline":
        env["PYTHONPATH"] = spec["baseline"]
    proc = subprocess.run(
        [sys.executable, __file__, "--child", model],
        input=json.dumps(spec), capture_output=True, text=True, env=env,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{model} run failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout)


def best_of(runs: list[dict]) -> dict:
    """The fastest of *runs* by CPU time; the peak RSS is the largest seen."""
    best = min(runs, key=lambda r: r["cpu"])
    return {**best, "rss_mb": max(r["rss_mb"] for r in runs)}


def _ratio(ours: dict, other: dict, clock: str) -> float:
    """Calls per second of *ours* over those of *other*, by ``wall`` or ``cpu`` seconds."""
    return (ours["calls"] / ours[clock]) / (other["calls"] / other[clock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--duration", default="60s", help="simulated time (default 60s)")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs per model")
    parser.add_argument("--collapse", action="store_true", help="keep the crash rule")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive model")
    parser.add_argument("--baseline", metavar="PATH",
                        help="also run the herdsim package in this directory (PYTHONPATH)")
    parser.add_argument("--tiers", type=int, default=1,
                        help="the downstream at the bottom of this many tiers (default 1)")
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="PATH=VALUE", help="override a scenario field (repeatable)")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child](json.load(sys.stdin))))
        return
    if args.workers < 1 or args.repeat < 1 or args.tiers < 1:
        parser.error("--workers, --repeat and --tiers must be at least 1")

    from rich.console import Console
    from rich.table import Table

    from herdsim import ScenarioError

    try:
        sc = scaled_scenario(args.workers, args.duration, args.collapse, args.sets)
    except ScenarioError as exc:
        raise SystemExit(f"error: {exc}") from None
    console = Console()
    ds = sc.downstream
    console.print(
        f"outage.yaml scaled to {sc.workers.count:,} workers: {sc.workload.rate:,.0f} jobs/s, "
        f"{ds.concurrency:,} slots x {ds.service.mean * 1000:g} ms, {sc.duration:g} s simulated, "
        f"strategy {sc.retry.strategy}, crash rule {'on' if ds.overload.collapse else 'off'}, "
        f"best of {args.repeat}", highlight=False)
    if sc.retry.strategy != "exponential" and not args.no_naive:
        console.print("note: the naive model always uses exponential backoff")
    # only the fields set away from their defaults: an earlier herdsim need not know newer ones
    scenario = sc.model_dump(mode="json", exclude_defaults=True)
    if args.tiers > 1:
        scenario = tiered(scenario, args.tiers, sc.workers.count)  # type: ignore[arg-type]
        console.print(f"{args.tiers} tiers: the calls counted are the bottom tier's",
                      highlight=False)
    spec = {"scenario": scenario, "naive": naive_params(sc), "baseline": args.baseline}
    naive = not args.no_naive and args.tiers == 1
    models = ["herdsim"] + ["baseline"] * bool(args.baseline) + ["naive"] * naive
    runs: dict[str, list[dict]] = {model: [] for model in models}
    for round_ in range(args.repeat):  # interleaved, so a busy spell hits every model
        for model in models:
            with console.status(f"running {model} ({round_ + 1} of {args.repeat})…"):
                runs[model].append(child(model, spec))
    results = {model: best_of(model_runs) for model, model_runs in runs.items()}

    table = Table(show_header=True, header_style="bold")
    for column in ("model", "calls", "wall s", "CPU s", "calls / wall s", "calls / CPU s",
                   "peak RSS MiB"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for model, r in results.items():
        table.add_row(model, f"{r['calls']:,}", f"{r['wall']:.1f}", f"{r['cpu']:.1f}",
                      f"{r['calls'] / r['wall']:,.0f}", f"{r['calls'] / r['cpu']:,.0f}",
                      f"{r['rss_mb']:,.0f}")
    console.print(table)

    ours = results["herdsim"]
    if ours["calls"] < MIN_CALLS:
        console.print(f"note: fewer than {MIN_CALLS:,} calls; raise --duration")
    if "baseline" in results:
        base = results["baseline"]
        cpu_ratio = _ratio(ours, base, "cpu")
        verdict = "ok" if cpu_ratio >= SPEED_TARGET else "BELOW TARGET"
        console.print(f"speed ratio herdsim / baseline ({args.baseline}): "
                      f"{cpu_ratio:.2f}x by CPU time (target >= {SPEED_TARGET:g}x: {verdict}); "
                      f"{_ratio(ours, base, 'wall'):.2f}x by wall time", highlight=False)
    if "naive" in results:
        naive = results["naive"]
        ratio, cpu_ratio = _ratio(ours, naive, "wall"), _ratio(ours, naive, "cpu")
        verdict = "ok" if ratio >= SPEED_TARGET else "BELOW TARGET"
        console.print(f"speed ratio herdsim / naive: {ratio:.2f}x by wall time "
                      f"(target >= {SPEED_TARGET:g}x: {verdict}); {cpu_ratio:.2f}x by CPU time",
                      highlight=False)
    verdict = "ok" if ours["rss_mb"] < MEMORY_TARGET_MB else "OVER TARGET"
    console.print(f"herdsim peak memory: {ours['rss_mb']:,.0f} MiB at {sc.workers.count:,} "
                  f"workers (target < {MEMORY_TARGET_MB:,} MiB at 100,000: {verdict})",
                  highlight=False)


if __name__ == "__main__":
    main()

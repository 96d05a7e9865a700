"""Sweep benchmark: the same sweep serially, in local processes and on a Dask LocalCluster.

    python benchmarks/sweep.py                 # 32 tasks of scenarios/metastable_sweep.yaml
    python benchmarks/sweep.py --memory        # also: driver peak RSS, 100 vs 800 tiny tasks

The sweep is 4 outage durations x 4 loads x 2 strategies = 32 tasks of the bundled
``scenarios/metastable_sweep.yaml`` (a quarter to one second each). With 2 workers the
parallel time is about half the serial time plus the tail (one worker idle while the other
finishes the last task) and the driver's own work (validation, writing results): at 16
tasks that tail alone was 0.57 x serial here, at 32 tasks 0.54 x. First the tasks are computed
in a plain loop in this process (``run_task``, no files): that is the *compute*. Then each
executor runs the whole sweep into a fresh directory (validation, tasks, one file per task,
combined tables). For each it prints the wall time, tasks per minute, and the per-task
overhead: ``(wall x workers - compute) / tasks``, the worker time not spent computing
(start-up, transfers, writing, idle workers at the end). The Dask cluster is started
before the clock (its start-up is printed apart), as a long-lived cluster would be.

The target is local/serial <= 0.55 with 2 workers. On a machine shared with other jobs,
wall times vary from run to run: the load average is printed beside them.

``--memory`` runs sweeps of 100 and 800 tiny tasks (20 ms each) in a subprocess each and
prints the driver's peak RSS: it should not grow with the number of tasks.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from herdsim.experiments.parallel import default_processes
from herdsim.experiments.sweep import plan, run_sweep, run_task

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "metastable_sweep.yaml"
GRID = ["downstream.outages.0.duration=500ms:8s:4:log", "workload.rate=400:800:4"]
STRATEGIES = ["exponential", "full_jitter"]
WORKERS = 2
TARGET = 0.55
TINY = """name: tiny
seed: 1
duration: 2s
workload: {arrivals: poisson, rate: 50}
workers: {count: 10}
downstream: {concurrency: 4, service: {mean: 20ms}}
retry: {strategy: exponential, base: 50ms, cap: 1s, max_retries: 3}
"""


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (pool workers)."""
    own, ended = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def timed(label: str, func) -> tuple[float, float]:
    """Wall and CPU seconds of ``func()`` (CPU of Dask's workers is not visible here)."""
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), cpu_seconds()
    func()
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    print(f"  {label:<24} {wall:6.1f} s wall {cpu:6.1f} s CPU  (load average {load:.1f})",
          flush=True)
    return wall, cpu


def speed() -> None:
    sweep = plan(SCENARIO, GRID, STRATEGIES)
    n = sweep.n_tasks
    print(f"{n} tasks of {SCENARIO.name}, {WORKERS} workers, {default_processes()} cores here")
    compute, _ = timed("compute (plain loop)", lambda: [run_task(t) for t in sweep.tasks()])
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        serial = timed("serial executor", lambda: run_sweep(
            sweep, out / "serial", processes=1, progress=False))
        local = timed("local processes", lambda: run_sweep(
            sweep, out / "local", processes=WORKERS, progress=False))
        started = time.perf_counter()
        with LocalCluster(n_workers=WORKERS, threads_per_worker=1,
                          dashboard_address=None) as cluster:
            print(f"  (Dask LocalCluster start-up {time.perf_counter() - started:.1f} s)")
            dask = timed("Dask LocalCluster", lambda: run_sweep(
                sweep, out / "dask", scheduler=cluster.scheduler_address, progress=False))
    print(f"\n{'executor':<18} {'tasks/min':>10} {'overhead/task':>14} {'CPU/task':>9}")
    for name, (wall, cpu), workers in (("serial", serial, 1), ("local processes", local, WORKERS),
                                       ("Dask LocalCluster", dask, None)):
        overhead = (wall * (workers or WORKERS) - compute) / n
        cpu_text = f"{cpu / n:7.2f} s" if workers else "      –"
        print(f"{name:<18} {n / wall * 60:10.1f} {overhead * 1000:11.0f} ms {cpu_text}")
    ratio = local[0] / serial[0]
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"\nlocal/serial time ratio: {ratio:.2f} ({verdict} the target <= {TARGET})")


def memory() -> None:
    print("\ndriver peak RSS (local processes, tiny tasks):")
    for n in (100, 800):
        rss = subprocess.run([sys.executable, __file__, "--driver", str(n)], check=True,
                             capture_output=True, text=True).stdout.strip()
        print(f"  {n:>4} tasks: {rss} MB", flush=True)


def driver(n: int) -> None:
    """Run a sweep of *n* tiny tasks; print this process's peak RSS in MB."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "tiny.yaml"
        path.write_text(TINY)
        sweep = plan(path, [f"workload.rate=10.0:100.0:{n // 2}"], replications=2)
        run_sweep(sweep, Path(scratch) / "out", processes=WORKERS, progress=False)
    print(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", action="store_true", help="also measure driver memory")
    parser.add_argument("--driver", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        driver(args.driver)
        return
    speed()
    if args.memory:
        memory()


if __name__ == "__main__":
    main()

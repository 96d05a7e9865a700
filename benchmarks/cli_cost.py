"""What ``herdsim run`` costs beside its simulation: CPU per phase, best of N fresh processes.

    python benchmarks/cli_cost.py [--repeat 5] [--scenario scenarios/outage.yaml]
                                  [--baseline DIR]

Runs ``python -m herdsim run SCENARIO --out TMP --timings`` N times, as a user would (the
time estimate before the run and the summary table after it included), each in a fresh
interpreter with ``PYTHONPATH`` at this checkout (and, with ``--baseline``, at that
checkout too, the runs interleaved so both see the same machine load). Each process's CPU
(user + system) is read from ``resource.getrusage(RUSAGE_CHILDREN)`` around it; its phases
from the ``--timings`` table on stderr, grouped: start-up and imports, load (scenario,
estimate), simulate, analyse, save (every file), draw (every figure), print, other. Each
group is the best (least CPU) of the N runs, so the column does not add up to the total,
the best whole process. ``outside`` is that process's CPU less its simulation. A checkout
without ``--timings`` gives its total alone.

Then it compares the two checkouts' output directories of the first run: the data files
(everything but figures) must be byte-identical (summary.json but for the wall clock it
records, checksums.json for the files compared; a Parquet file must read back as the same
table with pandas, its encodings may differ), figures are listed when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUPS = ("start-up and imports", "load", "simulate", "analyse", "save", "draw", "print",
          "other")
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
WALL_CLOCK_KEYS = ("wall_seconds", "calls_per_wall_second")  # summary.json's own clock
ROW = re.compile(r"^[│|]\s*(.+?)\s*[│|]\s*([-\d.]+)\s*[│|]\s*\d+%\s*[│|]\s*([-\d.–]+)\s*[│|]")


def group(phase: str) -> str:
    """The group of a ``--timings`` row (``save jobs.parquet`` -> ``save``)."""
    if phase in ("load and check the scenario", "estimate the run"):
        return "load"
    first = phase.split(":")[0].split()[0]
    return next((g for g in GROUPS if g.startswith(first)), phase)


def parse(stderr: str) -> dict[str, float]:
    """The ``--timings`` table as ``group -> CPU seconds`` (and ``total``)."""
    cpu: dict[str, float] = {}
    for line in stderr.splitlines():
        match = ROW.match(line.strip())
        if match:
            name = match.group(1)
            key = "total" if name == "total" else group(name)
            cpu[key] = cpu.get(key, 0.0) + float(match.group(2))
    return cpu


def once(tree: Path, scenario: Path, out: Path, timings: bool) -> tuple[float, float, dict]:
    """One fresh process: its CPU (rusage), wall seconds and ``--timings`` groups."""
    env = dict(os.environ, PYTHONPATH=str(tree), COLUMNS="200", MPLBACKEND="Agg")
    argv = [sys.executable, "-m", "herdsim", "run", str(scenario), "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv + ["--timings"] * timings, env=env, cwd=tree,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{tree}: herdsim run exited {done.returncode}: {done.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall, parse(done.stderr)


def knows_timings(tree: Path) -> bool:
    env = dict(os.environ, PYTHONPATH=str(tree))
    helps = subprocess.run([sys.executable, "-m", "herdsim", "run", "--help"], env=env,
                           cwd=tree, capture_output=True, text=True, check=False).stdout
    return "--timings" in helps


def best(runs: list[tuple[float, float, dict]]) -> dict[str, float]:
    """Per group, the least CPU of the runs; ``process``: the least whole-process CPU."""
    table = {"process": min(cpu for cpu, _, _ in runs), "wall": min(w for _, w, _ in runs)}
    for name in (*GROUPS, "total"):
        values = [phases[name] for _, _, phases in runs if name in phases]
        if values:
            table[name] = min(values)
    outside = [cpu - phases["simulate"] for cpu, _, phases in runs if "simulate" in phases]
    if outside:
        table["outside"] = min(outside)
    return table


def content(path: Path) -> object:
    """What must not change of an output file: its bytes; summary.json's without the wall
    clock it measured; a Parquet file's table as pandas reads it (as CSV text, every
    float at full precision); checksums.json's digests of the files compared by bytes."""
    if not path.is_file():
        return None
    if path.name == "summary.json":
        return {k: v for k, v in json.loads(path.read_text()).items()
                if k not in WALL_CLOCK_KEYS}
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
        return (str(frame.dtypes.to_dict()), frame.to_csv(index=False, float_format="%.17g"))
    if path.name == "checksums.json":
        return {k: v for k, v in json.loads(path.read_text()).items()
                if not k.endswith((*FIGURE_SUFFIXES, ".parquet")) and k != "summary.json"}
    return path.read_bytes()


def same_files(a: Path, b: Path) -> tuple[list[str], list[str]]:
    """(data files that differ or are missing, figures that differ) of two output dirs."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    data, figures = [], []
    for name in names:
        left, right = content(a / name), content(b / name)
        if left is not None and left == right:
            continue
        (figures if name.endswith(FIGURE_SUFFIXES) else data).append(name)
    return data, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scenario", type=Path, default=Path("scenarios/outage.yaml"))
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with")
    args = parser.parse_args()
    trees = {"this": ROOT}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    timed = {name: knows_timings(tree) for name, tree in trees.items()}
    runs: dict[str, list] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="herdsim-cli-cost-") as scratch:
        for i in range(args.repeat):
            for name, tree in trees.items():
                scenario = args.scenario if args.scenario.is_absolute() else tree / args.scenario
                runs[name].append(once(tree, scenario, Path(scratch) / f"{name}-{i}",
                                       timed[name]))
        if "baseline" in trees:
            data, figures = same_files(Path(scratch) / "this-0", Path(scratch) / "baseline-0")
    tables = {name: best(r) for name, r in runs.items()}
    print(f"herdsim run {args.scenario} --timings: CPU seconds, best of {args.repeat} "
          "fresh processes (per row)")
    print(f"{'':24}" + "".join(f"{name:>12}" for name in tables)
          + ("  change" if len(tables) == 2 else ""))
    for key in (*GROUPS, "total", "process", "outside", "wall"):
        values = [t.get(key) for t in tables.values()]
        if all(v is None for v in values):
            continue
        cells = "".join(f"{v:12.3f}" if v is not None else f"{'–':>12}" for v in values)
        change = (f"  {values[0] / values[1] - 1:+.0%}" if len(values) == 2 and
                  None not in values and values[1] else "")
        label = {"process": "process CPU (rusage)", "outside": "outside the simulation",
                 "wall": "wall (s)", "total": "total (--timings)"}.get(key, key)
        print(f"{label:24}{cells}{change}")
    if "baseline" in trees:
        print("data files identical to the baseline's" if not data else
              f"DATA FILES DIFFER from the baseline's: {', '.join(data)}")
        if figures:
            print(f"figures (and checksums.json) differ: {', '.join(figures)}")


if __name__ == "__main__":
    main()

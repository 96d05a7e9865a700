"""Run Brooker's cache simulator (``cache_sim/cache_sim.py`` of
github.com/mbrooker/simulator_example) over seeds and store its reference numbers.

    python benchmarks/original_cache.py --original DIR/cache_sim/cache_sim.py \\
        --commit bbfe3946f0459a69f6012737c68fc63b973471be --seeds 20 \\
        --out herdsim/experiments/references/cache.json

The original is executed unchanged, once per seed, after ``numpy.random.seed(seed)``
(it draws from numpy's unseeded global stream; its four runs share that stream in
order, as they do in the original). Its printed CSV (about one-second bins) is parsed,
and per seed and backend capacity :func:`herdsim.analysis.cache.refill_time` measures
the seconds from the flush (4 s) to the end of the first bin starting after it whose hit
rate is back to 90% of the hit rate over the first three bins (those ending by 3.5 s;
the fourth holds the flush), or None when none is by the end (60 s). Its code is never
copied into herdsim.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

import numpy as np

from herdsim.analysis.cache import REFILLED, hit_rate, refill_time

FLUSH, PRE_END = 4.0, 3.5
CAPACITIES = {"backend_0.5%": 5, "backend_1%": 10, "backend_2%": 20, "backend_10%": 100}


def run_original(source: str, seed: int) -> dict[str, list[tuple[float, int, int]]]:
    """The original's bins per run name, executed once with numpy seeded by *seed*."""
    np.random.seed(seed)  # noqa: NPY002 (the original draws from numpy's global stream)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "cache_sim.py", "exec"), {"__name__": "__main__"})  # noqa: S102
    bins: dict[str, list[tuple[float, int, int]]] = {}
    for line in out.getvalue().splitlines()[1:]:
        t, hits, misses, _, name = line.split(",")
        bins.setdefault(name, []).append((float(t), int(hits), int(misses)))
    return bins


def measure(bins: list[tuple[float, int, int]]) -> dict:
    """Pre-flush hit rate, refill time (s, None: not by the end) and the last bin's rate."""
    ends = np.array([b[0] for b in bins])
    starts = np.concatenate([[0.0], ends[:-1]])
    hits = np.array([b[1] for b in bins], dtype=float)
    misses = np.array([b[2] for b in bins], dtype=float)
    before = ends <= PRE_END
    pre = hits[before].sum() / (hits[before].sum() + misses[before].sum())
    return {"pre_flush_hit_rate": float(pre),
            "refill_time": refill_time(starts, ends, hits, misses, FLUSH, PRE_END),
            "last_hit_rate": float(hit_rate(hits, misses)[-1])}


def _mean_curve(curves: list[list[tuple[float, float]]]) -> list[list[float]]:
    n = min(len(c) for c in curves)
    return [[round(float(np.mean([c[i][0] for c in curves])), 4),
             round(float(np.mean([c[i][1] for c in curves])), 5)] for i in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--original", type=Path, required=True)
    parser.add_argument("--commit", required=True, help="the commit the file was read at")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    source = args.original.read_text(encoding="utf-8")
    runs, curves = [], {name: [] for name in CAPACITIES}
    for seed in range(args.seeds):
        for name, bins in run_original(source, seed).items():
            runs.append({"seed": seed, "backend": name, "capacity": CAPACITIES[name],
                         **measure(bins)})
            curves[name].append([(t, h / (h + m)) for t, h, m in bins])
    summary = []
    for name, capacity in CAPACITIES.items():
        mine = [r for r in runs if r["backend"] == name]
        times = [r["refill_time"] for r in mine if r["refill_time"] is not None]
        summary.append({
            "capacity": capacity, "runs": len(mine), "refilled": len(times),
            "refill_time_mean": float(np.mean(times)) if times else None,
            "refill_time_min": min(times) if times else None,
            "refill_time_max": max(times) if times else None,
            "pre_flush_hit_rate_mean": float(np.mean([r["pre_flush_hit_rate"] for r in mine])),
            "last_hit_rate_mean": float(np.mean([r["last_hit_rate"] for r in mine])),
            # the mean over seeds of each printed bin: its end (s) and hit rate
            "curve": _mean_curve(curves[name])})
    reference = {
        "source": "github.com/mbrooker/simulator_example cache_sim/cache_sim.py",
        "commit": args.commit,
        "seeds": list(range(args.seeds)),
        "command": f"python benchmarks/original_cache.py --original cache_sim/cache_sim.py "
                   f"--commit {args.commit} --seeds {args.seeds} --out {args.out}",
        "seeding": "numpy.random.seed(seed) before executing the unchanged file",
        "flush": FLUSH, "pre_flush_bins_end_by": PRE_END, "refilled_at": REFILLED,
        "summary": summary, "runs": runs}
    args.out.write_text(json.dumps(reference, indent=1) + "\n", encoding="utf-8")
    for row in summary:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

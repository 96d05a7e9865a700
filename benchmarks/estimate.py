"""The up-front estimate against what runs measure: CPU seconds and peak memory.

    python benchmarks/estimate.py                     # every bundled scenario + stacks/tenacity
    python benchmarks/estimate.py --only layers,outage
    python benchmarks/estimate.py --measured runs.json   # measure once, keep the figures
    python benchmarks/estimate.py --measured runs.json --reuse   # the table from them

Each case runs in a fresh interpreter (``python -c``), with ``PYTHONPATH`` at this checkout:
it imports herdsim, pandas and numpy and loads the scenario first, so that the peak
memory measured (the process's ``ru_maxrss`` after the run less before it) is the run's
own; its CPU is ``time.process_time()`` around :func:`herdsim.run` (or
:func:`herdsim.compare` with ``processes=1``: every arm in that process, one after the
other). The calls counted are every tier's (the workers' attempts, and each service's
calls in a call graph). The estimate is :func:`herdsim.planning.estimate.estimate`'s, at
the speed :func:`~herdsim.planning.estimate.calls_per_cpu_second` measures in this process.
The table prints the ratio estimate / measured: ``tests/planning`` keeps none of these
numbers; docs/scaling.md holds the table of one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STACKS = ["sidekiq", "celery", "aws-standard", "envoy", "tenacity"]

CHILD = r"""
import json, resource, sys, time
import numpy, pandas
import herdsim
from herdsim.results import result
spec = json.loads(sys.argv[1])
sc = herdsim.load_scenario(spec["path"], spec["overrides"])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
started = time.process_time()
if spec.get("presets"):
    out = herdsim.compare(sc, presets=spec["presets"], processes=1, progress=False,
                          force=True)
    summaries = [arm.summary for arm in out.arms] if hasattr(out, "arms") else []
    calls = None
else:
    res = herdsim.run(sc, force=True)
    s = res.summary
    tiers = s.get("tiers") or {}
    calls = sum(t["calls"] for t in tiers.values()) if tiers else s["attempts_total"]
cpu = time.process_time() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"cpu": cpu, "peak": max(after - before, 0), "calls": calls}))
"""


def cases(only: set[str] | None) -> list[dict]:
    """Every bundled scenario as it is, then the stacks comparison's tenacity arm and the
    whole comparison (the README's five presets)."""
    from herdsim.config import bundled

    out = [{"name": name, "path": str(bundled.path(name)), "overrides": {}}
           for name in bundled.names()]
    stacks = str(bundled.path("stacks"))
    out.append({"name": "stacks+tenacity arm", "path": stacks,
                "overrides": {"retry.preset": "tenacity"}})
    out.append({"name": "compare stacks (5 presets)", "path": stacks, "overrides": {},
                "presets": STACKS})
    return [c for c in out if only is None or c["name"].split()[0] in only
            or c["name"] in only]


def measure(case: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def estimated(case: dict) -> tuple[float, float, float]:
    """(CPU seconds, peak bytes, calls) the estimate gives *case*."""
    import herdsim
    from herdsim.planning import estimate

    sc = herdsim.load_scenario(case["path"], case["overrides"])
    if case.get("presets"):
        arms = [herdsim.load_scenario(case["path"], {"retry.preset": p})
                for p in case["presets"]]
        work = estimate.plan([estimate.estimate(a) for a in arms], replications=1,
                             at_once=1)
        return work.cpu, work.bytes, work.calls
    guess = estimate.estimate(sc)
    return guess.cpu, guess.bytes, guess.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated case names (first word)")
    parser.add_argument("--measured", type=Path, help="a JSON file of measurements")
    parser.add_argument("--reuse", action="store_true",
                        help="read the measurements from --measured instead of running")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    known = json.loads(args.measured.read_text()) if args.reuse and args.measured else {}
    rows = []
    for case in cases(only):
        got = known.get(case["name"]) or measure(case)
        known[case["name"]] = got
        if args.measured and not args.reuse:
            args.measured.write_text(json.dumps(known, indent=1))
        rows.append((case, got, estimated(case)))
        print(f"measured {case['name']}: {got}", file=sys.stderr, flush=True)
    print("| case | CPU s estimated | CPU s measured | ratio | peak MB estimated | "
          "peak MB measured | ratio | calls estimated | calls measured |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case, got, (cpu, peak, calls) in rows:
        measured_calls = "" if got["calls"] is None else f"{got['calls']:,}"
        peak_mb = max(got["peak"], 1e6) / 1e6
        print(f"| {case['name']} | {cpu:.2f} | {got['cpu']:.2f} | "
              f"{cpu / max(got['cpu'], 1e-3):.2f} | {peak / 1e6:.0f} | {peak_mb:.0f} | "
              f"{peak / 1e6 / peak_mb:.2f} | {calls:,.0f} | {measured_calls} |")


if __name__ == "__main__":
    main()

"""The up-front estimate against what runs measure: CPU seconds and peak memory.

    python benchmarks/estimate.py                     # every bundled scenario + stacks arms
    python benchmarks/estimate.py --only layers,outage
    python benchmarks/estimate.py --measured runs.json   # keep the figures: a case
                                                      # already in the file is not rerun

Each case runs in a fresh interpreter (``python -c``), with ``PYTHONPATH`` at this
checkout: it imports herdsim, pandas and numpy and loads the scenario first, so that the
peak memory measured (the process's ``ru_maxrss`` after the run less before it) is the
run's own; its CPU is ``time.process_time()`` around :func:`herdsim.run`. The calls
counted are every tier's (the workers' attempts, and each service's calls in a graph).

The stacks comparison (``herdsim compare stacks --presets sidekiq,celery,aws-standard,
envoy,tenacity``, the README's) is measured arm by arm, each a ``run`` of stacks.yaml
with ``--set retry.preset=P`` as the comparison runs it: its row sums their CPU and
calls and takes the largest peak (one process, ``--processes 1``); the estimate is
:func:`~herdsim.planning.estimate.plan` of the five arms. The tenacity arm alone takes
tens of minutes of CPU: ``--only`` without it for a quick table.

The estimate is :func:`herdsim.planning.estimate.estimate`'s, at the speed
:func:`~herdsim.planning.estimate.calls_per_cpu_second` measured in the case's own
process right before its run (CPU seconds grow with the load of the machine: both
figures see the same). The table
prints the ratio estimate / measured; ``tests/planning`` keeps none of these numbers;
docs/architecture.md holds the table of one machine.
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
COMPARISON = "compare stacks (5 presets)"

CHILD = r"""
import json, resource, sys, time
import numpy, pandas
import herdsim
from herdsim.results import result
spec = json.loads(sys.argv[1])
sc = herdsim.load_scenario(spec["path"], spec["overrides"])
from herdsim.planning import estimate
speed = estimate.calls_per_cpu_second()  # this machine now: the estimate's own yardstick
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
started = time.process_time()
s = herdsim.run(sc, force=True).summary
cpu = time.process_time() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tiers = s.get("tiers") or {}
calls = sum(t["calls"] for t in tiers.values()) if tiers else s["attempts_total"]
print(json.dumps({"cpu": cpu, "peak": max(after - before, 0), "calls": calls,
                  "speed": speed}))
"""


def cases(only: set[str] | None) -> list[dict]:
    """Every bundled scenario as it is, then stacks.yaml under each preset of the
    README's comparison."""
    from herdsim.config import bundled

    out = [{"name": name, "path": str(bundled.path(name)), "overrides": {}}
           for name in bundled.names()]
    out += [{"name": f"stacks+{preset} arm", "path": str(bundled.path("stacks")),
             "overrides": {"retry.preset": preset}} for preset in STACKS]
    return [c for c in out if only is None or c["name"] in only
            or c["name"].split()[0] in only]


def measure(case: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def estimated(cases_: list[dict], speed: float) -> tuple[float, float, float]:
    """(CPU seconds at *speed*, peak bytes, calls) the estimate gives the runs of
    *cases_* one after the other."""
    import herdsim
    from herdsim.planning import estimate

    guesses = [estimate.estimate(herdsim.load_scenario(c["path"], c["overrides"]))
               for c in cases_]
    work = estimate.plan(guesses, replications=1, at_once=1)
    return work.work / speed, work.bytes, work.calls


def row(name: str, got: dict, guess: tuple[float, float, float]) -> str:
    cpu, peak, calls = guess
    peak_mb = max(got["peak"], 1e6) / 1e6
    return (f"| {name} | {cpu:.2f} | {got['cpu']:.2f} | {cpu / max(got['cpu'], 1e-3):.2f} | "
            f"{peak / 1e6:.0f} | {peak_mb:.0f} | {peak / 1e6 / peak_mb:.2f} | "
            f"{calls:,.0f} | {got['calls']:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated case names (first word)")
    parser.add_argument("--measured", type=Path,
                        help="a JSON file of measurements: read, and written as they come")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    known = (json.loads(args.measured.read_text())
             if args.measured and args.measured.exists() else {})
    rows = []
    for case in cases(only):
        got = known.get(case["name"]) or measure(case)
        known[case["name"]] = got
        if args.measured:
            args.measured.write_text(json.dumps(known, indent=1))
        print(f"measured {case['name']}: {got}", file=sys.stderr, flush=True)
        rows.append(row(case["name"], got, estimated([case], got["speed"])))
    arms = [c for c in cases(None) if c["name"].startswith("stacks+")]
    if all(c["name"] in known for c in arms):
        got = {"cpu": sum(known[c["name"]]["cpu"] for c in arms),
               "peak": max(known[c["name"]]["peak"] for c in arms),
               "calls": sum(known[c["name"]]["calls"] for c in arms)}
        cpu = sum(estimated([c], known[c["name"]]["speed"])[0] for c in arms)
        rows.append(row(COMPARISON, got, (cpu, *estimated(arms, 1.0)[1:])))
    print("| case | CPU s estimated | CPU s measured | ratio | peak MB estimated | "
          "peak MB measured | ratio | calls at most | calls made |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()

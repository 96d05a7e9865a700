"""Instructions per call: herdsim against an earlier herdsim, immune to a busy machine.

    python benchmarks/instructions.py --baseline /tmp/herdsim-base   # W1, W2 and the story
    python benchmarks/instructions.py --baseline DIR --workloads W1 --seconds 30

CPU time on a shared 2-core machine moves by 10-20% from run to run; the number of
instructions a run executes does not. Each workload runs under ``valgrind --tool=cachegrind
--cache-sim=no`` (counting, no cache simulation) twice per version: once for
``--seconds`` of simulated time and once for a tenth of it, so the difference is the
instructions of the extra calls alone (imports, parsing and the frames' fixed cost cancel).
Prints the instructions per call of each version and their ratio (baseline / current:
above 1 means the current version executes fewer instructions per call).

Workloads are ``peers.py``'s, shortened: W1 (M/M/100 at 800/s), W2 (W1 with a 10 s down
outage at a third of the run and exponential backoff) and the story (``outage.yaml`` at
10,000 workers, ``engine.py``'s scaling, its outage where the scenario has it). The short
runs have no outage: they stop before it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = r"""
import json, sys
sys.path.insert(0, {here!r})
spec = json.loads(sys.argv[1])
import herdsim
if spec["workload"] == "story":
    from engine import scaled_scenario
    sets = [] if spec["outage_at"] is not None else ["downstream.outages=[]"]
    sc = scaled_scenario(10_000, str(spec["seconds"]) + "s", False, sets)
else:
    import peers
    d = peers.mm100_scenario(spec["workload"])
    d["duration"] = spec["seconds"]
    if spec["outage_at"] is None:
        d["downstream"]["outages"] = []
    elif d["downstream"]["outages"]:
        d["downstream"]["outages"][0].update(start=spec["outage_at"], duration=10.0)
    sc = herdsim.load_scenario(d)
result = herdsim.run(sc)
print(json.dumps({{"calls": int(result.summary["attempts_total"])}}))
"""


def measure(path: str | None, workload: str, seconds: float,
            outage_at: float | None) -> tuple[int, int]:
    """(instructions, calls) of one run of *workload* for *seconds* by the herdsim in
    *path* (None: the one importable here), W2's outage at *outage_at* (None: none)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts in every run
    if path is not None:
        env["PYTHONPATH"] = path
    spec = {"workload": workload, "seconds": seconds, "outage_at": outage_at}
    proc = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", CHILD.format(here=str(HERE)), json.dumps(spec)],
        capture_output=True, text=True, env=env, cwd=HERE)
    if proc.returncode != 0:
        sys.exit(f"{workload} failed: {proc.stderr.strip().splitlines()[-1:]}")
    refs = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if refs is None:
        sys.exit("valgrind printed no instruction count")
    return int(refs.group(1).replace(",", "")), json.loads(proc.stdout)["calls"]


def per_call(path: str | None, workload: str, seconds: float) -> float:
    """Instructions per call of the calls between a tenth of *seconds* and *seconds*
    (W2's outage among them)."""
    short_i, short_c = measure(path, workload, seconds / 10, None)  # before W2's outage
    long_i, long_c = measure(path, workload, seconds, seconds / 3)
    return (long_i - short_i) / (long_c - short_c)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a directory holding an earlier "
                                                          "herdsim package")
    parser.add_argument("--workloads", default="W1,W2,story")
    parser.add_argument("--repeat", type=int, default=1, help="runs per version (the "
                                                               "spread shows the noise)")
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds")
    args = parser.parse_args()
    print(f"{'workload':8} {'baseline':>12} {'current':>12} {'ratio':>7}  (instructions/call)")
    for workload in args.workloads.split(","):
        seconds = args.seconds if workload != "story" else args.seconds / 2
        for _ in range(args.repeat):
            base = per_call(args.baseline, workload, seconds)
            current = per_call(None, workload, seconds)
            print(f"{workload:8} {base:12,.0f} {current:12,.0f} {base / current:7.3f}",
                  flush=True)


if __name__ == "__main__":
    main()

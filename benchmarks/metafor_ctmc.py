"""Metafor's CTMC (its README example) against herdsim's simulation and fluid model.

    python benchmarks/metafor_ctmc.py [--replications 3] [--duration 2000]

The system: one server, exponential service at 10/s, Poisson arrivals at 9.5/s, a queue
of 100 (Metafor's qsize; herdsim's one slot + a waiting room of 99), a client timeout of
3 s and 4 retries sent at the timeout (herdsim: a fixed 1 ms sleep after it). Metafor's
queue keeps the jobs whose client left and serves them; herdsim's nearest is
``serve_abandoned: true``. In Metafor's client an answer to any attempt completes the
request and a timeout that finds it completed sends no retry: herdsim's
``retry.late_answers`` (docs/validation.md §6); and a request dropped at a full queue is
not retried (its timeout finds it dropped): ``retry_on: [timeout]``. The simulation runs
without them, with late answers, and with both (Metafor's client).
The fluid model refuses late answers (it does not read them): its rows are without.

Reference numbers: tests/fluid/metafor_ctmc.json (regenerated with Metafor's own code at
the commit named there). herdsim's, from an empty queue and from a full one (``backlog``:
100 calls at t = 0): the mean of waiting + in service after a 100 s warm-up (live calls
only: herdsim's gauges do not count the abandoned calls still in the room, which
Metafor's queue does), the share of calls refused at a full room (what arrivals see of
P(full)), and whether a full queue drains within the run (Metafor: its expected time).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from herdsim.config.loading import load_scenario
from herdsim.results.predicted import predict
from herdsim.results.result import run

ARMS = (("off, every failure", False, False), ("on, every failure", True, False),
        ("on, timeouts only (Metafor's client)", True, True))
REFERENCE = Path(__file__).resolve().parents[1] / "tests/fluid/metafor_ctmc.json"


def scenario(duration: float, seed: int = 1, late_answers: bool = False,
             only_timeouts: bool = False) -> dict:
    """The README example as a herdsim scenario (*late_answers*, *only_timeouts*:
    Metafor's client)."""
    retry_on = {"retry_on": ["timeout"]} if only_timeouts else {}
    return {"name": "metafor_readme", "seed": seed, "duration": duration, "bin": 1.0,
            "workload": {"arrivals": "poisson", "rate": 9.5},
            "workers": {"count": None},
            "downstream": {"concurrency": 1, "queue_limit": 99, "timeout": 3.0,
                           "serve_abandoned": True,
                           "service": {"distribution": "exponential", "mean": 0.1}},
            "retry": {"strategy": "fixed", "base": 0.001, "cap": 1.0, "max_retries": 4,
                      "late_answers": late_answers, **retry_on}}


def numbers(timeseries, summary, warm: float) -> tuple[float, float, str]:
    """Mean queue (waiting + in service, live calls), the share of calls refused, and the
    state (recovered: the queue drained)."""
    late = timeseries[timeseries["time"] >= warm]
    queue = float((late["waiting"] + late["in_flight"]).mean())
    refused = float(summary["rejected_total"] / max(summary["attempts_total"], 1.0))
    return queue, refused, str(summary["state"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2000.0)
    args = parser.parse_args()
    ref = json.loads(REFERENCE.read_text())
    print(f"Metafor CTMC (commit {ref['commit'][:7]}): mean queue {ref['mean_queue']:.1f}, "
          f"P(full) {ref['p_full']:.2f}, time for a full queue to drain "
          f"{ref['time_to_drain']:.2g} s")
    print("| herdsim | late answers, retried | start | mean queue (live) | calls refused at a full "
          "room | state |")
    print("|---|---|---|---|---|---|")
    for start, backlog in (("empty", 0), ("full", 100)):
        for arm, late, only in ARMS:
            rows = []
            for seed in range(1, args.replications + 1):
                data = scenario(args.duration, seed, late, only)
                data["workload"]["backlog"] = backlog
                result = run(load_scenario(data))
                rows.append(numbers(result.timeseries, result.summary, 100.0))
            print(f"| simulation ({args.replications} runs) | {arm} | "
                  f"{start} | {np.mean([r[0] for r in rows]):.1f} | "
                  f"{np.mean([r[1] for r in rows]):.2f} | {', '.join(r[2] for r in rows)} |")
        data = scenario(args.duration)
        data["workload"]["backlog"] = backlog
        fluid = predict(load_scenario(data))
        q, refused, state = numbers(fluid.timeseries, fluid.summary, 100.0)
        print(f"| fluid | off, every failure (it refuses the others) | {start} | {q:.1f} | "
              f"{refused:.2f} | {state} |")


if __name__ == "__main__":
    main()

"""A broker blip under a million clients: peak memory and CPU of one run.

    python benchmarks/reconnect.py [--clients 1000000] [--strategy full_jitter]

Runs ``scenarios/reconnect.yaml`` (docs/model.md, "Connection herds") scaled to
``--clients``: the broker's handshake slots, connection limit and crash threshold grow
with the clients (× clients / 3,000), so the story is the bundled one, wider; the run is
60 s so that full jitter's stragglers are back. It goes through ``herdsim.run`` (the
engine, then the frames and the summary) in this process, and prints the peak resident
memory (``ru_maxrss``) and the CPU seconds (user + system) of the whole process, imports
included, with the run's own figures and the estimate it was run under (within the
default budget: a client connects at most once a sleep, so time bounds its connects).
docs/scaling.md keeps the numbers measured on the 2-core machine this was built on.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = 3000  # clients in scenarios/reconnect.yaml


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1_000_000)
    parser.add_argument("--strategy", default="full_jitter")
    parser.add_argument("--duration", default="60s")
    args = parser.parse_args()

    import herdsim
    from herdsim.planning.estimate import estimate

    scale = args.clients / BUNDLED
    scenario = herdsim.load_scenario(ROOT / "herdsim" / "scenarios" / "reconnect.yaml", {
        "workers.count": str(args.clients),
        "downstream.concurrency": str(max(1, round(8 * scale))),
        "downstream.overload.collapse.threshold": str(max(1, round(1000 * scale))),
        "downstream.broker.max_connections": str(round(3500 * scale)),
        "retry.strategy": args.strategy,
        "duration": args.duration,
    })
    guess = estimate(scenario)
    print(f"estimated: {guess.describe()}")
    started = time.perf_counter()
    result = herdsim.run(scenario)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    summary = result.summary
    back = summary["reconnect_time"]
    print(f"clients {args.clients:,}  strategy {args.strategy}  duration {args.duration}")
    print(f"  connects {summary['attempts_total']:,}  per dropped connection "
          f"{summary['connects_per_drop']:.2f}  broker crashes {summary['collapses']}  "
          "every client back " + (f"{back:.1f} s after the drop (simulated)"
                                  if back is not None else "never (within the run)"))
    print(f"  engine {summary['wall_seconds']:.1f} s wall; herdsim.run {wall:.1f} s wall")
    print(f"  process CPU {usage.ru_utime + usage.ru_stime:.1f} s (user + system), "
          f"peak RSS {usage.ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()

"""Where herdsim's time per call goes: a cProfile of one run, grouped by module.

    python benchmarks/profile.py                 # W1 (peers.py's scenario), top 20
    python benchmarks/profile.py --workload W2 --top 30
    python benchmarks/profile.py --workload story  # outage.yaml at 10,000 workers, 60 s

The run is ``peers.py``'s: W1 or W2 as open-loop callers, or the story's queue workers,
through ``herdsim.run``, end to end. Every function's own time (``tottime``) is summed
by where it lives: a herdsim module (``model.worker``: the worker loop;
``model.downstream``, ``model.service``, ``model.calls``: admission and the call's state;
``model.recorder``; ``model.simulation``: arrivals for open-loop callers, the gauges'
sampler; ``model.queues``: the main queue and its idle workers; ``model.kernel``:
herdsim's own events), SimPy's modules, and C built-ins by name (``array.append`` is the recorder's
appends, ``heappush``/``heappop`` the event heap). Each line gives microseconds per
simulated call and the Python calls made per simulated call; the constructors and
factory functions of the objects each call allocates (its ``Call``, ``Job``, timers and
processes) are listed with their counts per call.

cProfile's own overhead is charged per Python call, so the profiled run is slower than a
timed one and the shares lean towards code making many small calls: read the table as
where the calls go, and time changes with ``peers.py``.
"""

from __future__ import annotations

import argparse
import importlib
import linecache
import pstats
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

METHOD = re.compile(r"<method '(\w+)' of '([\w.]+)' objects>")
BUILTIN = re.compile(r"<built-in method _?([\w.]+)>")
AFTER = ("from_finished",)  # after the simulation: frames and the summary
# The functions that make the objects a call allocates without a Python ``__init__``
# (which would cost a second frame), and what each makes. ``at``, ``later`` and
# ``urgent`` make their timer with ``unfired``.
FACTORIES = {"make_job": "Job", "make_call": "Call", "unfired": "Timer",
             "call_later": "Timer"}


def where(filename: str, funcname: str) -> str:
    """The group a profiled function belongs to: a dotted module, or a C built-in."""
    if filename == "~":
        method, builtin = METHOD.match(funcname), BUILTIN.match(funcname)
        if method:
            return f"C: {method.group(2)}.{method.group(1)}"
        return f"C: {builtin.group(1) if builtin else funcname.strip('<>')}"
    path = Path(filename)
    parts = path.with_suffix("").parts
    for package in ("herdsim", "simpy", "numpy", "pandas"):
        if package in parts:
            i = len(parts) - 1 - parts[::-1].index(package)
            return ".".join(parts[i + 1:]) if package == "herdsim" else (
                ".".join(parts[i:i + 2]))
    return path.name


def owner(filename: str, line: int) -> str:
    """The class whose method starts at *line* of *filename* (for constructors)."""
    for n in range(line, 0, -1):
        text = linecache.getline(filename, n)
        if text.startswith("class "):
            return re.match(r"class (\w+)", text).group(1)
    return "?"


def stdlib_cprofile():
    """The standard library's ``cProfile``: it imports ``profile``, and this script's
    folder, first on ``sys.path``, holds this ``profile.py``."""
    here = sys.path.pop(0)
    try:
        return importlib.import_module("cProfile")
    finally:
        sys.path.insert(0, here)


def profile(workload: str) -> tuple[pstats.Stats, int]:
    """Profile one herdsim run of *workload*; the stats and the simulated calls."""
    from peers import mm100_scenario, story_spec

    import herdsim

    spec = story_spec()["scenario"] if workload == "story" else mm100_scenario(workload)
    # imports, first-use caches (a second's run, without the outages: they end later)
    warm = {**spec, "duration": 1, "downstream": {**spec["downstream"], "outages": []}}
    herdsim.run(herdsim.load_scenario(warm))
    sc = herdsim.load_scenario(spec)
    profiler = stdlib_cprofile().Profile(time.process_time)  # CPU time: the machine is shared
    profiler.enable()
    result = herdsim.run(sc)
    profiler.disable()
    return pstats.Stats(profiler), int(result.summary["attempts_total"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="W1", choices=("W1", "W2", "story"))
    parser.add_argument("--top", type=int, default=20, help="rows per table")
    args = parser.parse_args()
    stats, calls = profile(args.workload)
    entries = stats.stats  # (file, line, name) -> (primitive calls, calls, tottime, cumtime, _)
    total = sum(tt for _, _, tt, _, _ in entries.values())
    n_calls = sum(nc for _, nc, _, _, _ in entries.values())
    after = sum(ct for (_, _, name), (_, _, _, ct, _) in entries.items() if name in AFTER)
    print(f"herdsim on {args.workload}: {calls:,} simulated calls, {total:.2f} s profiled "
          f"({total / calls * 1e6:.1f} us a call, {n_calls / calls:.1f} Python calls a "
          f"call); frames and summary after the simulation: {after / calls * 1e6:.1f} us "
          "a call")

    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for (file, _, name), (_, nc, tt, _, _) in entries.items():
        group = groups[where(file, name)]
        group[0] += tt
        group[1] += nc
    print(f"\n{'by module (own time)':36} {'us / call':>10} {'share':>7} {'calls / call':>13}")
    for group, (tt, nc) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{group:36} {tt / calls * 1e6:>10.2f} {tt / total:>7.1%} {nc / calls:>13.2f}")

    print(f"\n{'by function (own time)':60} {'us / call':>10} {'share':>7} {'calls / call':>13}")
    ranked = sorted(entries.items(), key=lambda kv: -kv[1][2])[:args.top]
    for (file, line, name), (_, nc, tt, _, _) in ranked:
        label = f"{where(file, name)}:{line} {name}" if file != "~" else where(file, name)
        print(f"{label[:60]:60} {tt / calls * 1e6:>10.2f} {tt / total:>7.1%} "
              f"{nc / calls:>13.2f}")

    print(f"\n{'allocated per call (constructors and factories)':60} {'per call':>10}")
    inits = [(f"{where(file, name)}.{owner(file, line)}" if name == "__init__" else
              f"{where(file, name)}.{name} -> {FACTORIES[name]}", nc)
             for (file, line, name), (_, nc, _, _, _) in entries.items()
             if (name == "__init__" or name in FACTORIES and "herdsim" in Path(file).parts)
             and nc >= calls / 100]
    for label, nc in sorted(inits, key=lambda x: -x[1]):
        print(f"{label:60} {nc / calls:>10.2f}")


if __name__ == "__main__":
    main()

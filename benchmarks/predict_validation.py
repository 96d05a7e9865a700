"""The fluid model held to the simulation: ``herdsim predict`` against the mean of N
replications of ``herdsim run`` on the bundled scenarios under fixed, exponential and
full jitter backoff.

    python benchmarks/predict_validation.py [--replications 5] [--scenarios outage,poison]
                                            [--markdown]

Per case: the simulation's majority state and mean succeeded share, jobs not succeeded,
collapses and short-window peak (``peak_calls``), and the fluid's. The issue's criteria:
the same state (outside the near-threshold band); succeeded share within 0.05; jobs not
succeeded within 25% where they exceed 1% of the jobs; collapses equal; peak within 25%.
A scenario the fluid model refuses is listed with its one-line reason.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.results.predicted import predict
from herdsim.results.result import run

SCENARIOS = ("outage", "poison", "brownout", "breaker", "budget", "metastable", "admission",
             "open_loop", "retry_after")
STRATEGIES = ("fixed", "exponential", "full_jitter")


def case(name: str, strategy: str, replications: int) -> dict:
    """One scenario under one strategy: the fluid's numbers and the simulations' mean."""
    sc = load_scenario(f"herdsim/scenarios/{name}.yaml", {"retry.strategy": strategy})
    row = {"scenario": name, "strategy": strategy}
    try:
        began = time.process_time()
        fluid = predict(sc).summary
        row["fluid_cpu"] = time.process_time() - began
    except ScenarioError as exc:
        row["refused"] = str(exc)
        return row
    sims = []
    for r in range(replications):
        seeded = sc.model_copy(update={"seed": sc.seed + r})
        sims.append(run(seeded).summary)
    mean = {key: sum(s[key] for s in sims) / len(sims) for key in
            ("succeeded_fraction", "collapses", "peak_calls", "jobs_submitted")}
    # each replication's own jobs not succeeded (their Poisson arrivals differ: the first
    # one's jobs less the mean succeeded was off by that spread, ~150 jobs in admission)
    mean["not"] = sum(s["jobs_submitted"] - s["jobs_succeeded"] for s in sims) / len(sims)
    jobs = mean["jobs_submitted"]
    row.update(sim_state=Counter(s["state"] for s in sims).most_common(1)[0][0],
               fluid_state=fluid["state"], sim_succeeded=mean["succeeded_fraction"],
               fluid_succeeded=fluid["succeeded_fraction"],
               sim_not=mean["not"],
               fluid_not=fluid["jobs_submitted"] - fluid["jobs_succeeded"], jobs=jobs,
               sim_collapses=mean["collapses"], fluid_collapses=fluid["collapses"],
               sim_peak=mean["peak_calls"], fluid_peak=fluid["peak_calls"])
    row["misses"] = misses(row)
    return row


def misses(r: dict) -> list[str]:
    """The criteria this case fails."""
    out = []
    if r["fluid_state"] != "near threshold" and r["fluid_state"] != r["sim_state"]:
        out.append("state")
    if abs(r["fluid_succeeded"] - r["sim_succeeded"]) > 0.05:
        out.append("succeeded")
    if r["sim_not"] > 0.01 * r["jobs"] and abs(r["fluid_not"] / r["sim_not"] - 1) > 0.25:
        out.append("not succeeded")
    if round(r["sim_collapses"]) != r["fluid_collapses"]:
        out.append("collapses")
    if abs(r["fluid_peak"] / r["sim_peak"] - 1) > 0.25:
        out.append("peak")
    return out


def markdown(rows: list[dict]) -> str:
    """The table of docs/validation.md."""
    lines = ["| scenario | strategy | state sim / fluid | succeeded sim / fluid | "
             "not succeeded sim / fluid | collapses sim / fluid | peak sim / fluid | misses |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['scenario']} | {r['strategy']} | refused: {r['refused']} "
                         "| | | | | |")
            continue
        lines.append(
            f"| {r['scenario']} | {r['strategy']} | {r['sim_state']} / {r['fluid_state']} | "
            f"{r['sim_succeeded']:.3f} / {r['fluid_succeeded']:.3f} | "
            f"{r['sim_not']:,.0f} / {r['fluid_not']:,.0f} | "
            f"{r['sim_collapses']:.1f} / {r['fluid_collapses']} | "
            f"{r['sim_peak']:,.0f} / {r['fluid_peak']:,.0f} | "
            f"{', '.join(r['misses']) or 'none'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=5)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in args.scenarios.split(","):
        for strategy in args.strategies.split(","):
            rows.append(case(name, strategy, args.replications))
            print(rows[-1], file=sys.stderr, flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()

"""The fluid model's own CPU time (the grid and the integration, no drawing) on every
bundled scenario it covers, under fixed, exponential and full jitter backoff: the issue
asks under a second each.

    python benchmarks/predict_speed.py [--repeat 3] [--strategies fixed,full_jitter]

CPU seconds (``time.process_time``: what the process itself spent, so a busy machine
inflates it less than the wall clock), the best of ``--repeat`` runs, per scenario and
strategy; a scenario the model refuses is listed with its one-line reason.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.fluid import inputs, support
from herdsim.fluid.integrate import integrate

BUNDLED = Path(__file__).resolve().parent.parent / "herdsim" / "scenarios"
STRATEGIES = ("fixed", "exponential", "full_jitter")
LIMIT = 1.0  # CPU s: the bound


def cpu(path: Path, strategy: str, repeat: int) -> float:
    """The best CPU time of the grid and the integration of *path* under *strategy*."""
    sc = load_scenario(path, {"retry.strategy": strategy})
    support.check(sc)
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        dt = inputs.step_for(sc)
        integrate(sc, inputs.build(sc, dt))
        best = min(best, time.process_time() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    strategies = args.strategies.split(",")
    print(f"| scenario | {' | '.join(strategies)} |")
    print("|---" * (len(strategies) + 1) + "|")
    worst = 0.0
    for path in sorted(BUNDLED.glob("*.yaml")):
        cells = []
        for strategy in strategies:
            try:
                took = cpu(path, strategy, args.repeat)
            except ScenarioError as exc:
                cells = [f"refused: {exc}"]
                break
            worst = max(worst, took)
            cells.append(f"{took:.3f} s")
        print(f"| {path.stem} | {' | '.join(cells)} |")
    print(f"\nslowest: {worst:.3f} CPU s ({'within' if worst < LIMIT else 'OVER'} the "
          f"{LIMIT:.0f} s bound)")


if __name__ == "__main__":
    main()

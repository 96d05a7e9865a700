"""``herdsim boundary`` against the sweep it replaces, on scenarios/metastable_sweep.yaml.

    python benchmarks/boundary_vs_sweep.py [--path workload.rate] [--range 300:900]
                                           [--processes 2] [--figure docs/img/boundary.png]

The sweep: 20 points over the range x 10 replications (200 simulations), the crossing of
a logistic fit to them (the same penalised maximum likelihood as the search's, on every
run). The search: ``boundary()`` from the fluid model's answer. It passes when the
search's 95% interval contains the sweep's crossing with at least 5x fewer simulations.
The figure: the sweep's share of runs recovering at each point, its fit, and the
search's runs, crossing and interval.
"""

from __future__ import annotations

import argparse

import numpy as np

from herdsim.config.loading import load_scenario
from herdsim.experiments.boundary import boundary, fit, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="herdsim/scenarios/metastable_sweep.yaml")
    parser.add_argument("--path", default="workload.rate")
    parser.add_argument("--range", default="300:900")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--figure", default="docs/img/boundary.png")
    args = parser.parse_args()
    lo, hi = (float(v) for v in args.range.split(":"))
    base = load_scenario(args.scenario)
    found = boundary(base, args.path, (lo, hi), processes=args.processes)
    points = list(np.linspace(lo, hi, 20))
    sweep = simulate(base, args.path, points, 10, 1000, args.processes, None, False, None)
    value, low, high, below = fit(sweep, found.below)
    inside = found.low <= value <= found.high
    ratio = len(sweep) / found.simulations
    print(found.text())
    print(f"sweep: {len(sweep)} simulations, logistic crossing {value:.4g} (95% CI "
          f"{low:.4g}–{high:.4g}); inside the search's interval: {inside}; "
          f"{ratio:.1f}x fewer simulations")
    draw(args, sweep, value, found)


def draw(args, sweep, value, found) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4.5), layout="constrained")
    ax = fig.add_subplot()
    share = sweep.groupby("x")["recovered"].mean()
    ax.plot(share.index, share.to_numpy(), "o", color="#0072B2",
            label=f"sweep: share recovering of 10 runs ({len(sweep)} simulations)")
    ax.axvline(value, color="#0072B2", ls="--", label=f"sweep's logistic crossing {value:.4g}")
    ax.axvspan(found.low, found.high, color="#E69F00", alpha=0.3,
               label=f"boundary's 95% interval ({found.simulations} simulations)")
    ax.axvline(found.value, color="#E69F00", label=f"boundary {found.value:.4g}")
    if found.fluid is not None:
        ax.axvline(found.fluid, color="#009E73", ls=":", label=f"fluid model {found.fluid:.4g}")
    runs = found.runs.groupby("x")["recovered"].mean()
    ax.plot(runs.index, runs.to_numpy(), "s", color="#E69F00", mfc="none",
            label="boundary's runs: share recovering")
    ax.set_xlabel(args.path)
    ax.set_ylabel("P(not metastable)")
    ax.set_title(f"{found.scenario.name}: where recovering stops, searched vs swept")
    ax.legend(fontsize=8, loc="best")
    fig.savefig(args.figure, dpi=110)


if __name__ == "__main__":
    main()

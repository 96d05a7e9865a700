"""Hold the simulation to the testbed: fixed, exponential and full jitter on
scenarios/testbed.yaml, a few seeds each, simulated and run for real (docs/validation.md).

    python benchmarks/testbed_validation.py                 # 3 strategies x seeds 1,2,3
    python benchmarks/testbed_validation.py --seeds 1,2,3,4,5 --out runs/validation

Prints one row per run (the lateness measured, and each check simulated / real / agrees)
and the ranking of the arms by their mean peak after the outage, simulated and real.
Each run takes the scenario's duration plus about ten seconds of start-up and
simulation. Run it on a quiet machine: lateness measured while other work shares the
cores is the machine's, not the testbed's (runs over the bound are marked invalid).
``--figures DIR`` also writes the agreement figure and one run's sim_vs_real.png there.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib as mpl
import pandas as pd

from herdsim.config.loading import load_scenario
from herdsim.plots.style import STYLE, Figure
from herdsim.testbed import agreement
from herdsim.testbed.run import testbed

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ("fixed", "exponential", "full_jitter")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "testbed.yaml"))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--out", help="keep every run directory here (default: deleted)")
    parser.add_argument("--figures", help="write the agreement figure here")
    args = parser.parse_args()
    keep = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="herdsim-validation-"))
    rows = []
    first_figure = None
    try:
        for strategy in args.strategies.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                sc = load_scenario(args.scenario, {"retry.strategy": strategy, "seed": seed})
                out = keep / f"{strategy}-{seed}"
                done = testbed(sc, out, args.processes)
                first_figure = first_figure or out / "sim_vs_real.png"
                row = {"strategy": strategy, "seed": seed,
                       "lateness_p99_ms": done.real.summary["lateness_p99_ms"],
                       "valid": done.real.summary["testbed_valid"]}
                for check in agreement.checks(done.sim, done.real).to_dict("records"):
                    name = check["check"]
                    row[f"{name}_sim"], row[f"{name}_real"] = check["simulated"], check["real"]
                    row[f"{name}_agrees"] = check["agrees"]
                rows.append(row)
                print(_line(row), flush=True)
        table = pd.DataFrame(rows)
        print()
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        _ranking(table)
        if args.figures:
            figures = Path(args.figures)
            figures.mkdir(parents=True, exist_ok=True)
            _figure(table).savefig(figures / "testbed_validation.png", dpi=80)
            if first_figure is not None:
                shutil.copyfile(first_figure, figures / "testbed_sim_vs_real.png")
    finally:
        if not args.out:
            shutil.rmtree(keep, ignore_errors=True)


def _line(row: dict) -> str:
    checks = "  ".join(
        f"{name} {row[f'{name}_sim']!s:.5} / {row[f'{name}_real']!s:.5} "
        f"{'ok' if row[f'{name}_agrees'] else 'DIFFERS'}"
        for name in ("peak_after_outage", "succeeded_fraction", "recovery_time"))
    valid = "valid" if row["valid"] else "INVALID"
    return (f"{row['strategy']:<12} seed {row['seed']}: lateness p99 "
            f"{row['lateness_p99_ms']:5.1f} ms ({valid})  {checks}")


def _ranking(table: pd.DataFrame) -> None:
    """The arms ranked by their mean peak after the outage (lowest first), both ways."""
    means = table.groupby("strategy")[["peak_after_outage_sim", "peak_after_outage_real"]].mean()
    sim = list(means["peak_after_outage_sim"].sort_values().index)
    real = list(means["peak_after_outage_real"].sort_values().index)
    print(f"\nranking by mean peak after the outage (lowest first): simulated {sim}, "
          f"real {real}: {'identical' if sim == real else 'DIFFERENT'}")
    agree = table.filter(like="_agrees")
    valid = table["valid"]
    print(f"checks agreeing: {int(agree.to_numpy().sum())} of {agree.size}; "
          f"runs within the lateness bound: {int(valid.sum())} of {len(valid)}")


def _figure(table: pd.DataFrame) -> Figure:
    """Each check, real against simulated, one point per run (hollow: invalid runs)."""
    colors = {"fixed": "#E69F00", "exponential": "#D55E00", "full_jitter": "#0072B2"}
    checks = (("peak_after_outage", "peak calls/s in 100 ms after the outage"),
              ("succeeded_fraction", "succeeded fraction"),
              ("recovery_time", "recovery time (s)"))
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(16, 5.5), layout="constrained")
        for ax, (name, label) in zip(fig.subplots(1, 3), checks, strict=True):
            sim = pd.to_numeric(table[f"{name}_sim"], errors="coerce")
            real = pd.to_numeric(table[f"{name}_real"], errors="coerce")
            for strategy, color in colors.items():
                mine = table["strategy"] == strategy
                for valid in (True, False):
                    pick = mine & (table["valid"] == valid)
                    ax.scatter(sim[pick], real[pick], s=70, label=strategy if valid else None,
                               facecolors=color if valid else "none", edgecolors=color)
            lo, hi = min(sim.min(), real.min()), max(sim.max(), real.max())
            ax.plot([lo, hi], [lo, hi], color="0.4", linewidth=1)
            ax.set_xlabel(f"simulated {label}")
            ax.set_ylabel("real (testbed)")
        fig.axes[0].legend(loc="upper left")
        fig.suptitle("testbed.yaml: real runs against the simulation (hollow: over the "
                     "lateness bound)")
    return fig


if __name__ == "__main__":
    sys.exit(main())

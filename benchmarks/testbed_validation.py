"""Hold the simulation to the testbed over a breadth of arms (docs/validation.md, "The
agreement table"): backoff strategies x worker counts x outage lengths on
scenarios/testbed.yaml, plus a breaker arm and a budget arm, each run for real several
times (seeds seed..seed+runs-1) and simulated for the same seeds. Only valid runs count
(lateness within the bound); each check passes when the simulation's mean lies within
2 sd of the valid real runs (herdsim.testbed.agreement).

    python benchmarks/testbed_validation.py          # the full breadth: 18 arms x 5 runs
    python benchmarks/testbed_validation.py --runs 3 --duration 12s --dilate 2 \\
        --markdown runs/agreement.md --figures docs/figures   # the reduced one docs show

Prints one line per arm as it finishes and, at the end, the agreement table (markdown).
An arm of 5 runs of the 20 s scenario takes about 2.5 min (5 min with --dilate 2): the
full breadth (90 runs) an hour or two. Run it on a quiet machine, or with --dilate.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd

from herdsim.config.loading import load_scenario
from herdsim.plots.style import STYLE, Figure
from herdsim.testbed.run import testbed

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ("fixed", "exponential", "full_jitter", "decorrelated_jitter")
WORKERS = (150, 300)
OUTAGES = ("1s", "2s")
EXTRA = {  # the breaker arm and the budget arm (300 workers, a 2 s outage, full jitter)
    "breaker": {"breaker.enabled": True, "breaker.minimum_calls": 20,
                "breaker.open_duration": "1s", "breaker.scope": "pool"},
    "budget": {"budget.kind": "token_bucket", "budget.preset": "aws",
               "budget.capacity": 100, "budget.scope": "pool"},
}
CHECKS = ("retries_total", "peak_after_outage", "recovery_time", "jobs_failed")


def arms(strategies, workers, outages) -> list[tuple[str, dict]]:
    """Every arm: its name and the overrides of scenarios/testbed.yaml."""
    out = []
    for strategy in strategies:
        for count in workers:
            for outage in outages:
                out.append((f"{strategy}, {count} workers, {outage} outage", {
                    "retry.strategy": strategy, "workers.count": count,
                    "workload.rate": 200 * count / 300,
                    "downstream.concurrency": 60 * count // 300,
                    "downstream.queue_limit": 60 * count // 300,
                    "downstream.outages.0.duration": outage}))
    for name, changes in EXTRA.items():
        out.append((f"{name}, full_jitter, 300 workers, 2s outage",
                    {"retry.strategy": "full_jitter", **changes}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "testbed.yaml"))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--workers", default=",".join(map(str, WORKERS)))
    parser.add_argument("--outages", default=",".join(OUTAGES))
    parser.add_argument("--no-extra", action="store_true", help="leave out the breaker "
                        "and budget arms")
    parser.add_argument("--runs", type=int, default=5, help="real runs per arm")
    parser.add_argument("--dilate", type=float, default=1.0)
    parser.add_argument("--duration", help="shorten the scenario (e.g. 12s)")
    parser.add_argument("--set", action="append", default=[], help="field=value, every arm")
    parser.add_argument("--calibrate", action="store_true", help="simulate each arm with "
                        "the turnaround its own real runs measured (herdsim testbed "
                        "--calibrate)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--out", help="keep every run directory here (default: deleted)")
    parser.add_argument("--markdown", help="write the agreement table here")
    parser.add_argument("--figures", help="write the agreement figure here")
    args = parser.parse_args()
    keep = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="herdsim-validation-"))
    common = dict(item.split("=", 1) for item in args.set)
    if args.duration:
        common["duration"] = args.duration
    chosen = arms(args.strategies.split(","), [int(w) for w in args.workers.split(",")],
                  args.outages.split(","))
    if args.no_extra:
        chosen = [arm for arm in chosen if not arm[0].startswith(tuple(EXTRA))]
    rows = []
    try:
        for i, (name, changes) in enumerate(chosen):
            sc = load_scenario(args.scenario, {**common, **changes})
            done = testbed(sc, keep / f"arm-{i}", args.processes, runs=args.runs,
                           dilate=args.dilate, calibrate_overhead=args.calibrate)
            row = _row(name, done)
            rows.append(row)
            print(_line(row), flush=True)
        table = pd.DataFrame(rows)
        text = markdown(table, args)
        print("\n" + text)
        if args.markdown:
            Path(args.markdown).write_text(text + "\n")
        if args.figures:
            figures = Path(args.figures)
            figures.mkdir(parents=True, exist_ok=True)
            _figure(table).savefig(figures / "testbed_validation.png", dpi=80)
    finally:
        if not args.out:
            shutil.rmtree(keep, ignore_errors=True)


def _row(name: str, done) -> dict:
    """The arm's checks as ``herdsim testbed`` judged them (the table's rows), with the
    sd of the valid real runs beside."""
    checks = done.table.set_index("kpi")
    valid = done.runs[done.runs["valid"]]
    row = {"arm": name, "runs": len(done.runs), "valid": len(valid),
           "lateness_p99_ms": float(done.runs["lateness_p99_ms"].median()),
           "turnaround_ms": float(done.turnaround["turnaround"].mean() * 1e3),
           "overhead": done.overhead}
    for check in (*CHECKS, "state"):
        if check not in checks.index or f"{check}_real" not in done.runs:
            continue
        c = checks.loc[check]
        if isinstance(c, pd.DataFrame):  # a KPI row and a check row share the key
            c = c.iloc[-1]
        real = pd.to_numeric(valid[f"{check}_real"], errors="coerce").dropna()
        row[f"{check}_sim"], row[f"{check}_real"] = c["simulated"], c["real"]
        row[f"{check}_sd"] = float(real.std(ddof=1)) if len(real) > 1 else None
        row[f"{check}_agrees"] = c["agrees"]
    if "state" in checks.index:
        c = checks.loc["state"]
        c = c.iloc[-1] if isinstance(c, pd.DataFrame) else c
        row["state_sim"], row["state_real"], row["state_agrees"] = (
            c["simulated"], c["real"], c["agrees"])
    return row


def _line(row: dict) -> str:
    parts = []
    for check in (*CHECKS, "state"):
        if f"{check}_agrees" in row:
            verdict = {True: "ok", False: "DIFFERS", None: "-"}[row[f"{check}_agrees"]]
            parts.append(f"{check} {_num(row[f'{check}_sim'])} / {_num(row[f'{check}_real'])}"
                         f" {verdict}")
    return (f"{row['arm']}: {row['valid']}/{row['runs']} valid, turnaround "
            f"{row['turnaround_ms']:.2f} ms  " + "  ".join(parts))


def _num(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "n/a"
    return value if isinstance(value, str) else f"{value:,.3g}"


def markdown(table: pd.DataFrame, args) -> str:
    """The agreement table: per arm, valid runs, each check's simulated mean, real mean
    ± sd of the valid runs, and whether it agrees."""
    head = ["arm", "valid runs", *(f"{c} sim / real ± sd" for c in CHECKS), "state sim / real"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table.to_dict("records"):
        cells = [row["arm"], f"{row['valid']} of {row['runs']}"]
        for check in CHECKS:
            if f"{check}_agrees" not in row:
                cells.append("")
                continue
            mark = {True: "✓", False: "✗", None: "not judged"}[row[f"{check}_agrees"]]
            cells.append(f"{_num(row[f'{check}_sim'])} / {_num(row[f'{check}_real'])} ± "
                         f"{_num(row[f'{check}_sd'])} {mark}")
        mark = {True: "✓", False: "✗", None: "not judged"}[row.get("state_agrees")]
        cells.append(f"{row.get('state_sim')} / {row.get('state_real')} {mark}")
        lines.append("| " + " | ".join(cells) + " |")
    judged = table.filter(like="_agrees")
    verdicts = judged.to_numpy().ravel()
    verdicts = [v for v in verdicts if v is not None and v == v]
    lines.append("")
    lines.append(f"{sum(bool(v) for v in verdicts)} of {len(verdicts)} checks judged agree; "
                 f"{int(table['valid'].sum())} of {int(table['runs'].sum())} real runs valid "
                 f"(--runs {args.runs}, --dilate {args.dilate:g}"
                 + (", --calibrate: each arm simulated with its own turnaround"
                    if args.calibrate else "")
                 + (f", duration {args.duration}" if args.duration else "") + ").")
    return "\n".join(lines)


def _figure(table: pd.DataFrame) -> Figure:
    """Retries and the peak after the outage, real (mean ± sd of the valid runs) against
    simulated (mean), one point per arm."""
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(13, 5.5), layout="constrained")
        for ax, (check, label) in zip(fig.subplots(1, 2), (
                ("retries_total", "retries"),
                ("peak_after_outage", "peak calls/s in 100 ms after the outage")),
                strict=True):
            sim = pd.to_numeric(table[f"{check}_sim"], errors="coerce")
            real = pd.to_numeric(table[f"{check}_real"], errors="coerce")
            sd = pd.to_numeric(table[f"{check}_sd"], errors="coerce")
            agrees = table[f"{check}_agrees"]
            for ok, color, text in ((True, "#0072B2", "agrees (within 2 sd)"),
                                    (False, "#D55E00", "differs")):
                pick = agrees.eq(ok)
                ax.errorbar(sim[pick], real[pick], yerr=2 * sd[pick], fmt="o", color=color,
                            label=text, capsize=3)
            lo, hi = np.nanmin([sim.min(), real.min()]), np.nanmax([sim.max(), real.max()])
            ax.plot([lo, hi], [lo, hi], color="0.4", linewidth=1)
            ax.set_xlabel(f"simulated {label}")
            ax.set_ylabel("real: mean, bars ±2 sd (valid runs)")
        fig.axes[0].legend(loc="upper left")
        fig.suptitle("Simulated against real, one point per arm judged (3+ valid runs)")
    return fig


if __name__ == "__main__":
    main()

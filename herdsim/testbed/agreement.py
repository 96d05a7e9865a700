"""Does the real run reproduce the simulation? The KPI table, sim beside real, and the
checks docs/validation.md holds the testbed to.

The testbed runs the scenario for real over several seeds (``--runs``, 5 by default)
and simulates each seed. Only the valid runs count (:mod:`herdsim.testbed.timing`: a
run whose lateness went over the bound measured the machine, not the scenario). Each
check compares the simulation's mean over the valid runs' seeds with the real runs' mean,
and passes when they lie within ``K`` (2) standard deviations of the real runs' own
run-to-run spread (sample sd over the valid runs), never less than the KPI's resolution
(:data:`CHECKS`): a tolerance the real side justifies, which a model off by more than the
noise fails. A check is judged only over at least :data:`MIN_VALID` valid runs (a spread
needs them); fewer and it says so (``agrees`` empty).

* ``retries_total``: retries, the core number of a retry storm (resolution: 1 retry);
* ``peak_after_outage``: calls/s in the busiest 100 ms window from the end of the last
  outage on, the herd landing (resolution: one call in the window);
* ``recovery_time``: over the runs that recovered (resolution: one bin, its measure);
* ``state``: the state most valid runs end in is one a simulated seed ends in, and the
  state most simulated seeds end in is one a valid run ends in (:func:`state_check`);
* ``jobs_failed``: jobs dead-lettered or still pending at the end (resolution: 1 job).
  Not the succeeded share: at 95-99% success a ±0.05 band could not fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd

from herdsim.analysis.kpis import BY_KEY
from herdsim.analysis.summary import peak_rate
from herdsim.results.result import Result

PEAK_WINDOW = 0.1  # s: the window of the peak after the outage
K = 2.0  # standard deviations of the real runs' spread the simulation's mean may lie off
MIN_VALID = 3  # valid runs a check needs (a spread from fewer is no spread)
TABLE_KPIS = ("succeeded_fraction", "goodput", "jobs_submitted", "jobs_succeeded",
              "jobs_dead_lettered", "jobs_pending", "attempts_total", "retries_total",
              "amplification", "rejected_total", "timeouts_total", "peak_attempt_rate",
              "peak_to_capacity", "collapses", "collapses_after_outage", "recovery_time",
              "breaker_trips", "latency_p50", "latency_p99", "state")


def peak_after_outage(result: Result) -> float | None:
    """Calls/s in the busiest ``PEAK_WINDOW`` from the end of the last outage on (None
    without an outage)."""
    ends = [end for _, end in result.scenario.outage_windows]
    if not ends:
        return None
    times = np.asarray(result.attempt_times, dtype=float)
    return peak_rate(times[times >= max(ends)], PEAK_WINDOW)


def jobs_failed(result: Result) -> int:
    """Jobs dead-lettered or still pending at the end."""
    s = result.summary
    return int(s["jobs_dead_lettered"] + s["jobs_pending"])


# check -> (its value in a run, its resolution, its unit)
CHECKS = {
    "retries_total": (lambda r: r.summary["retries_total"], lambda sc: 1.0, "retries"),
    "peak_after_outage": (peak_after_outage, lambda sc: 1 / PEAK_WINDOW, "calls/s"),
    "recovery_time": (lambda r: r.summary["recovery_time"], lambda sc: sc.bin, "s"),
    "jobs_failed": (jobs_failed, lambda sc: 1.0, "jobs"),
}


def _list(results: Result | Sequence[Result]) -> list[Result]:
    if isinstance(results, (list, tuple)):
        return list(results)
    return [cast(Result, results)]


def valid(result: Result) -> bool:
    """A real run counts when the machine kept up (a simulated one always does)."""
    return bool(result.summary.get("testbed_valid", True))


def spread_check(sim: Sequence[float], real: Sequence[float], resolution: float) -> dict:
    """The simulation's mean against the real runs' mean ± ``K`` sd (at least
    *resolution*): ``simulated``, ``real``, ``real_sd``, ``tolerance``, ``agrees`` (None
    with fewer than :data:`MIN_VALID` real values)."""
    sim_a, real_a = np.asarray(sim, dtype=float), np.asarray(real, dtype=float)
    sd = float(real_a.std(ddof=1)) if real_a.size > 1 else float("nan")
    mean_sim = float(sim_a.mean()) if sim_a.size else float("nan")
    mean_real = float(real_a.mean()) if real_a.size else float("nan")
    judged = real_a.size >= MIN_VALID and sim_a.size > 0
    tolerance = max(K * sd, resolution) if judged else float("nan")
    return {"simulated": mean_sim, "real": mean_real, "real_sd": sd, "tolerance": tolerance,
            "agrees": bool(abs(mean_sim - mean_real) <= tolerance) if judged else None}


def state_check(sim: Sequence[str], real: Sequence[str]) -> dict:
    """The states the simulated seeds and the valid real runs end in: each side's most
    common state (``simulated``, ``real``) and whether they agree: a most common state of
    each side is one the other side's runs end in (a split like 3 to 2 is the run-to-run
    spread; a state one side never reaches is a disagreement). None with fewer than
    :data:`MIN_VALID` real runs."""
    counts_sim, counts_real = Counter(sim), Counter(real)

    def modes(counts: Counter) -> list[str]:
        top = max(counts.values(), default=0)
        return [state for state, n in counts.most_common() if n == top]

    def shown(counts: Counter) -> str:
        return ", ".join(f"{state} {n}" for state, n in counts.most_common())

    judged = len(real) >= MIN_VALID and bool(sim)
    agrees = (any(m in counts_real for m in modes(counts_sim))
              and any(m in counts_sim for m in modes(counts_real)))
    return {"check": "state", "simulated": next(iter(modes(counts_sim)), None),
            "real": next(iter(modes(counts_real)), None), "real_sd": None, "tolerance": None,
            "runs": len(real), "unit": "",
            "rule": "the state most runs end in is one the other side ends in (simulated: "
                    f"{shown(counts_sim) or 'none'}; real: {shown(counts_real) or 'none'})",
            "agrees": agrees if judged else None}


def checks(sims: Result | Sequence[Result], reals: Result | Sequence[Result]
           ) -> pd.DataFrame:
    """One row per check over the valid real runs and the simulations of their seeds:
    ``check``, ``simulated``, ``real`` (means), ``real_sd``, ``tolerance``, ``runs`` (valid
    real runs), ``rule`` (text), ``agrees`` (None: not judged)."""
    pairs = [(s, r) for s, r in zip(_list(sims), _list(reals), strict=True) if valid(r)]
    scenario = _list(sims)[0].scenario
    outage = bool(scenario.outage_windows)
    rows = []
    for name, (value, resolution, unit) in CHECKS.items():
        if name in ("peak_after_outage", "recovery_time") and not outage:
            continue
        got = [(value(s), value(r)) for s, r in pairs]
        sim = [v for v, _ in got if v is not None]
        real = [v for _, v in got if v is not None]
        row = spread_check(sim, real, resolution(scenario))
        if name == "recovery_time" and len(pairs) >= MIN_VALID and not (sim and real):
            row["agrees"] = not sim and not real  # neither side recovered, or one only
        rows.append({"check": name, **row, "runs": len(pairs), "unit": unit,
                     "rule": f"within {K:g} sd of the real runs (at least "
                             f"{resolution(scenario):g} {unit})"})
    rows.append(state_check([s.summary["state"] for s, _ in pairs],
                            [r.summary["state"] for _, r in pairs]))
    return pd.DataFrame(rows)


def per_run(sims: Sequence[Result], reals: Sequence[Result]) -> pd.DataFrame:
    """One row per run: its seed, lateness, validity and each check's value, simulated and
    real."""
    rows = []
    for sim, real in zip(sims, reals, strict=True):
        s = real.summary
        row = {"seed": real.scenario.seed, "valid": valid(real),
               "lateness_p99_ms": s.get("lateness_p99_ms"),
               "invalid_reason": s.get("testbed_invalid_reason")}
        for name, (value, _, _) in CHECKS.items():
            row[f"{name}_sim"], row[f"{name}_real"] = value(sim), value(real)
        row["state_sim"], row["state_real"] = sim.summary["state"], s["state"]
        rows.append(row)
    return pd.DataFrame(rows)


def table(sims: Result | Sequence[Result], reals: Result | Sequence[Result]
          ) -> pd.DataFrame:
    """Each KPI simulated and real (the first run: ``kpi``, ``label``, ``unit``,
    ``simulated``, ``real``), then the checks over every valid run as rows of their own
    (with ``agrees``)."""
    sim, real = _list(sims)[0], _list(reals)[0]
    rows = [{"kpi": key, "label": BY_KEY[key].title(sim.summary), "unit": BY_KEY[key].unit,
             "simulated": sim.summary.get(key), "real": real.summary.get(key),
             "agrees": None} for key in TABLE_KPIS]
    for row in checks(sims, reals).to_dict("records"):
        tolerance = ("" if row["tolerance"] is None or row["tolerance"] != row["tolerance"]
                     else f", ±{row['tolerance']:.3g}")
        rows.append({"kpi": row["check"], "label": f"check: {row['check']} (mean of "
                     f"{row['runs']} valid runs{tolerance})",
                     "unit": row["unit"],
                     "simulated": row["simulated"] if row["runs"] else None,
                     "real": row["real"] if row["runs"] else None,
                     "agrees": row["agrees"]})
    return pd.DataFrame(rows)

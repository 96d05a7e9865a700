"""Does the real run reproduce the simulation? The KPI table, sim beside real, and the
checks docs/validation.md holds the testbed to.

* ``peak_after_outage``: calls/s in the busiest 100 ms window from the end of the last
  outage on (the herd landing): within 25%;
* ``succeeded_fraction``: within 0.05;
* ``recovery_time``: within 25% or two bins, whichever is larger (recovery is measured in
  whole bins, so a few tenths of a second are its resolution), plus one poll interval in
  requeue mode (the real poller's phase against the outage's end is set by when its process
  started, the simulated one's by t = 0: retries re-enter up to a poll apart), or both not
  recovered.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from herdsim.analysis.kpis import BY_KEY
from herdsim.analysis.summary import peak_rate
from herdsim.results.result import Result

PEAK_WINDOW = 0.1  # s: the window of the peak after the outage
PEAK_TOLERANCE = 0.25  # relative
FRACTION_TOLERANCE = 0.05  # absolute
RECOVERY_TOLERANCE = 0.25  # relative, with a floor of RECOVERY_BINS bins
RECOVERY_BINS = 2
TABLE_KPIS = ("succeeded_fraction", "goodput", "jobs_submitted", "jobs_succeeded",
              "jobs_dead_lettered", "jobs_pending", "attempts_total", "retries_total",
              "amplification", "rejected_total", "timeouts_total", "peak_attempt_rate",
              "peak_to_capacity", "collapses", "collapses_after_outage", "recovery_time",
              "latency_p50", "latency_p99", "state")


def peak_after_outage(result: Result) -> float | None:
    """Calls/s in the busiest ``PEAK_WINDOW`` from the end of the last outage on (None
    without an outage)."""
    ends = [end for _, end in result.scenario.outage_windows]
    if not ends:
        return None
    times = np.asarray(result.attempt_times, dtype=float)
    return peak_rate(times[times >= max(ends)], PEAK_WINDOW)


def checks(sim: Result, real: Result) -> pd.DataFrame:
    """One row per check: ``check``, ``simulated``, ``real``, ``tolerance`` (text),
    ``agrees``."""
    rows = []
    peak_sim, peak_real = peak_after_outage(sim), peak_after_outage(real)
    if peak_sim is not None and peak_real is not None:  # both have the outage
        rows.append({"check": "peak_after_outage", "simulated": peak_sim, "real": peak_real,
                     "tolerance": f"{PEAK_TOLERANCE:.0%}",
                     "agrees": abs(peak_real - peak_sim) <= PEAK_TOLERANCE * peak_sim})
    fs, fr = sim.summary["succeeded_fraction"], real.summary["succeeded_fraction"]
    rows.append({"check": "succeeded_fraction", "simulated": fs, "real": fr,
                 "tolerance": f"±{FRACTION_TOLERANCE:g}",
                 "agrees": fs is not None and fr is not None
                 and abs(fr - fs) <= FRACTION_TOLERANCE})
    if sim.scenario.outage_windows:
        rs, rr = sim.summary["recovery_time"], real.summary["recovery_time"]
        workers = sim.scenario.workers
        poll = workers.poll_interval if workers.retry_mode == "requeue" else 0.0
        slack = None if rs is None else max(RECOVERY_TOLERANCE * rs,
                                            RECOVERY_BINS * sim.scenario.bin) + poll
        rows.append({"check": "recovery_time", "simulated": rs, "real": rr,
                     "tolerance": f"{RECOVERY_TOLERANCE:.0%} or {RECOVERY_BINS} bins"
                                  + (f", + a poll ({poll:g} s)" if poll else ""),
                     "agrees": (rs is None and rr is None) or (
                         rs is not None and rr is not None and abs(rr - rs) <= slack)})
    return pd.DataFrame(rows)


def table(sim: Result, real: Result) -> pd.DataFrame:
    """Each KPI simulated and real: ``kpi``, ``label``, ``unit``, ``simulated``, ``real``,
    then the checks as rows of their own (with ``agrees``)."""
    rows = [{"kpi": key, "label": BY_KEY[key].title(sim.summary), "unit": BY_KEY[key].unit,
             "simulated": sim.summary.get(key), "real": real.summary.get(key), "agrees": None}
            for key in TABLE_KPIS]
    for row in checks(sim, real).to_dict("records"):
        rows.append({"kpi": row["check"], "label": f"check: {row['check']} "
                     f"({row['tolerance']})", "unit": "calls/s"
                     if row["check"] == "peak_after_outage" else "",
                     "simulated": row["simulated"], "real": row["real"],
                     "agrees": row["agrees"]})
    return pd.DataFrame(rows)

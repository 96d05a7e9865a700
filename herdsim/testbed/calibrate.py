"""The real per-attempt turnaround (``herdsim testbed --calibrate``): what one attempt
costs a real worker beyond the downstream's own time, as a distribution.

Every attempt a testbed worker makes is logged with five times on the one clock every
testbed process shares (:mod:`herdsim.testbed.workers`; the server's two come back in its
``X-Times`` header): when the attempt was *due* (the job dequeued, or its retry sleep
over), when the worker sent it (*start*), when the server's handler got it (*arrive*)
and let it go (*leave*), and when the worker had read the answer (*end*). Its turnaround
is everything but the handler's own time::

    turnaround = (end - due) - (leave - arrive)
               = wake (start - due) + out (arrive - start) + back (end - leave)

``wake`` is the process waking for a timer or a dequeued job and the bookkeeping before
the call (a shared breaker or budget's Redis round trips included), ``out`` and ``back``
the HTTP legs (aiohttp, the loopback, the server's event loop). The simulation's
``workers.attempt_overhead`` is this time (spent before the call leaves: the same for
the run's outcome, as the downstream's time does not depend on when within the attempt
it falls). :func:`fit` gives the lognormal of the same mean and log-spread, and
:func:`snippet` the lines to paste into the scenario. It is one distribution for every
attempt: first tries and retries (the summary's rows) may differ, and the field has no
split.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from herdsim.config.loading import load_scenario
from herdsim.config.scenario import Scenario

COMPONENTS = ("wake", "out", "back", "turnaround")
QUANTILES = (0.5, 0.9, 0.99)
MIN_SIGMA, MAX_SIGMA = 0.001, 10.0  # a lognormal's sigma as the scenario accepts it


def attempts(logs: list[dict[str, np.ndarray]], k: float = 1.0) -> pd.DataFrame:
    """One row per served attempt of every worker process's log (``turnaround.*``), its
    components in seconds of the scenario (a run *k* times dilated: divided by *k*) and
    ``retry`` (a retry, not a first try)."""
    cols = {name: np.concatenate([log[f"turnaround.{name}"] for log in logs])
            for name in ("due", "start", "arrive", "leave", "end", "retry")}
    served = ~np.isnan(cols["arrive"])
    c = {name: v[served] for name, v in cols.items()}
    frame = pd.DataFrame({"wake": c["start"] - c["due"], "out": c["arrive"] - c["start"],
                          "back": c["end"] - c["leave"]}) / k
    frame["turnaround"] = frame["wake"] + frame["out"] + frame["back"]
    frame["retry"] = c["retry"].astype(bool)
    return frame


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Each component's count, mean and quantiles (ms), over every attempt, the first
    tries and the retries: ``attempts``, ``component``, ``n``, ``mean_ms``, ``p50_ms`` …"""
    rows = []
    for which, part in (("all", frame), ("first tries", frame[~frame["retry"]]),
                        ("retries", frame[frame["retry"]])):
        for name in COMPONENTS:
            values = part[name].to_numpy()
            row = {"attempts": which, "component": name, "n": int(values.size),
                   "mean_ms": float(values.mean() * 1e3) if values.size else None}
            for q in QUANTILES:
                row[f"p{q * 100:g}_ms"] = (float(np.quantile(values, q) * 1e3)
                                           if values.size else None)
            rows.append(row)
    return pd.DataFrame(rows)


def fit(turnaround: np.ndarray) -> dict | None:
    """The lognormal with the sample's mean (3 significant digits, in ms, never in
    exponent form) and the sd of its logarithm (3 decimals, at least
    :data:`MIN_SIGMA`): a ``workers.attempt_overhead`` that validates as printed (None
    without two positive samples)."""
    values = np.asarray(turnaround, dtype=float)
    values = values[values > 0]
    if values.size < 2:
        return None
    ms = float(f"{values.mean() * 1e3:.3g}")
    sigma = float(np.log(values).std(ddof=1))
    return {"distribution": "lognormal",
            "mean": f"{np.format_float_positional(ms, trim='-')}ms",
            "sigma": min(MAX_SIGMA, max(MIN_SIGMA, round(sigma, 3)))}


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The attempts of the valid runs (column ``valid``), or every run's when none was
    valid (then the machine's lateness is in them)."""
    valid = frame[frame["valid"]]
    return frame if valid.empty else valid


def given(scenario: Scenario, fitted: dict) -> Scenario:
    """*scenario* with *fitted* as its ``workers.attempt_overhead``."""
    return load_scenario(scenario.to_dict(), {"workers.attempt_overhead": json.dumps(fitted)})


def snippet(fitted: dict, attempts: int) -> str:
    """*fitted* as lines to paste into a scenario: a comment saying what it was fitted
    to, then ``workers:`` and the field on one line (under an existing ``workers:``, the
    second line alone)."""
    flow = ", ".join(f"{key}: {value}" for key, value in fitted.items())
    return (f"# the real per-attempt turnaround, fitted to {attempts:,} attempts "
            "(paste the second line under the scenario's workers:)\n"
            f"workers:\n  attempt_overhead: {{{flow}}}")

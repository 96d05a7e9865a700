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
it falls). :func:`fit` gives the lognormal of the same mean and log-spread.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COMPONENTS = ("wake", "out", "back", "turnaround")
QUANTILES = (0.5, 0.9, 0.99)


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
    """The lognormal with the sample's mean and the sd of its logarithm: a
    ``workers.attempt_overhead`` (None without positive samples)."""
    values = np.asarray(turnaround, dtype=float)
    values = values[values > 0]
    if values.size < 2:
        return None
    return {"distribution": "lognormal", "mean": f"{values.mean() * 1e3:.3g}ms",
            "sigma": round(float(np.log(values).std(ddof=1)), 3)}

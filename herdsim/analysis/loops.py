"""Which loop holds it down: for a run that ends degraded or metastable, the sustaining
effects measured over its tail (the window the classifier's tail goodput is read on:
the last ``TAIL_FRACTION`` of the run, after the last outage; see
:mod:`herdsim.analysis.metastability`). The two loops of the field's account (Bronson et
al., HotOS'21; Huang et al., OSDI'22), and crashes as their own:

* **workload amplification**: calls per offered job (attempts over arrivals in the tail)
  above ``AMPLIFICATION`` (1.5): retries (or hedges) multiply the load;
* **capacity degradation**: calls served (successes, errors and calls served for nobody)
  per busy slot-second while the server is up, over its healthy value (one over the
  service's mean), below ``DEGRADATION`` (0.8): the server serves less per second of
  work than it does at rest (a degrading server, ``latency_per_call``, costly refusals);
* **crash-restart cycles**: a crash in the tail, or the server down for at least
  ``DOWN`` (5%) of it after the last outage.

Each figure is a ratio over the tail, read off the time series (the busy slots are the
``in_flight`` gauge at each bin start, an estimate of their time average).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from herdsim.analysis.metastability import TAIL_FRACTION

AMPLIFICATION = 1.5  # calls per offered job above which retries sustain the load
DEGRADATION = 0.8  # served per busy slot-second over the healthy value, below which ...
DOWN = 0.05  # share of the tail down after crashes from which restarts sustain it
NONE = "none measured"


def tail(ts: pd.DataFrame, scenario) -> np.ndarray:
    """The tail's bins: the last TAIL_FRACTION of the run, after the last outage."""
    start = max(scenario.last_outage_end or 0.0, scenario.duration * (1 - TAIL_FRACTION))
    return ts["time"].to_numpy() >= start


def calls_per_job(ts: pd.DataFrame, scenario) -> float | None:
    """Attempts over arrivals in the tail (None: no job arrived then)."""
    mask = tail(ts, scenario)
    jobs = float(ts["arrivals"].to_numpy()[mask].sum())
    return float(ts["attempts"].to_numpy()[mask].sum()) / jobs if jobs else None


def capacity_ratio(ts: pd.DataFrame, scenario) -> float | None:
    """Calls served per busy slot-second while up in the tail, over 1 / service mean
    (None: no busy slot-second while up)."""
    mask = tail(ts, scenario) & (ts["downstream_up"].to_numpy() > 0)
    busy = float(ts["in_flight"].to_numpy()[mask].sum()) * scenario.bin
    if busy <= 0:
        return None
    served = sum(float(ts[column].to_numpy()[mask].sum())
                 for column in ("success", "errors", "wasted"))
    return served / busy * scenario.downstream.service.mean


def down_fraction(ts: pd.DataFrame, scenario) -> float:
    """The share of the tail the server was down (its outages are over by then)."""
    mask = tail(ts, scenario)
    return float(1.0 - ts["downstream_up"].to_numpy()[mask].mean()) if mask.any() else 0.0


def _can_degrade(scenario) -> bool:
    """Whether the server has a mechanism that lowers what a busy slot serves (a
    ``degradation``, or latency growing with load): without one a low ratio is bins the
    server spent partly down, not a degradation."""
    ds = scenario.downstream
    return getattr(ds, "degradation", None) is not None or ds.overload.latency_per_call > 0


def sustained_by(ts: pd.DataFrame, scenario) -> str:
    """The sustaining effects measured, joined with `` + ``, or ``none measured``."""
    effects = []
    amplification = calls_per_job(ts, scenario)
    if amplification is not None and amplification > AMPLIFICATION:
        effects.append("workload amplification")
    ratio = capacity_ratio(ts, scenario)
    if ratio is not None and ratio < DEGRADATION and _can_degrade(scenario):
        effects.append("capacity degradation")
    crashed = bool(ts["crashes"].to_numpy()[tail(ts, scenario)].sum())
    if crashed or down_fraction(ts, scenario) >= DOWN:
        effects.append("crash-restart cycles")
    return " + ".join(effects) or NONE

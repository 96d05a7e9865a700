"""Which loop holds it down: for a run that ends degraded or metastable, the sustaining
effects measured over its tail (the window the classifier's tail goodput is read on:
the last ``TAIL_FRACTION`` of the run, after the last outage; see
:mod:`herdsim.analysis.metastability`). The two loops of the field's account (Bronson et
al., HotOS'21; Huang et al., OSDI'22), and crashes as their own:

* **workload amplification** above ``AMPLIFICATION`` (1.5): retries (or hedges,
  reconnects) multiply the load. A queue run's figure is calls per offered job (attempts
  over arrivals in the tail); a model of clients with an end of its own (``done_when``:
  the broker, occ) has no arrivals to speak of once its trigger is over, so its figure
  is calls per *open* job: attempts in the tail over the jobs not finished when it began
  or arriving in it (the broker: connects per client disconnected in the tail; 1 when
  each reconnects at its first connect);
* **capacity degradation**, either of
  - the server: calls served at the tier (successes, errors and calls served for nobody;
    with a cache, its hits and coalesced waiters taken out of the successes) per busy
    slot-second while it is up, over its healthy value (one over the service's mean),
    below ``DEGRADATION`` (0.8): it serves less per second of work than at rest (a
    degrading server, ``latency_per_call``, costly refusals);
  - a **cold cache**: a cache whose hit rate over the tail is below ``DEGRADATION`` of
    its hit rate before the first trigger (an outage, a flush, a spike), so the misses
    it lets through are more than the tier was sized for. A cache that starts cold
    (``warm: false``) has no window before its trigger: its reference is the hit rate a
    warm LRU of its size settles at under independent requests (Che's approximation,
    :mod:`herdsim.policies.cache.warm`; not measured for a TTL or unbounded Zipf keys);
* **crash-restart cycles**: a crash in the tail, or the server down for at least
  ``DOWN`` (5%) of it after the last outage.

Each figure is a ratio over the tail, read off the time series (the busy slots are the
``in_flight`` gauge at each bin start, an estimate of their time average). A call
graph's service tier is read off its own columns (:func:`tier_frame`); it has no busy-slot
gauge, so its capacity ratio is not measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from herdsim.analysis import cache
from herdsim.analysis.metastability import tail
from herdsim.policies import downstreams
from herdsim.policies.cache import warm

AMPLIFICATION = 1.5  # calls per offered (or open) job above which retries sustain the load
DEGRADATION = 0.8  # served per busy slot-second (or hit rate) over its healthy value, below ...
DOWN = 0.05  # share of the tail down after crashes from which restarts sustain it
NONE = "none measured"
AMPLIFIED, DEGRADED, CRASHING = ("workload amplification", "capacity degradation",
                                 "crash-restart cycles")
COLD = "cold cache"  # the capacity degradation of a cache: named in brackets
KEYS = ("sustained_by", "tail_calls_per_job", "tail_calls_per_open_job",
        "tail_capacity_ratio", "tail_down_fraction", "tail_hit_rate",
        "hit_rate_before")  # the summary's keys of a held-down run (a tier's: no ratio)


def _sum(ts: pd.DataFrame, column: str, mask: np.ndarray) -> float:
    return float(ts[column].to_numpy()[mask].sum()) if column in ts else 0.0


def _open_ended(scenario) -> bool:
    """A model of clients with an end of its own (its ``done_when``): the broker, occ."""
    return downstreams.named(scenario.downstream.model).done_when is not None


def calls_per_job(ts: pd.DataFrame, scenario) -> float | None:
    """Attempts over arrivals in the tail (None: no job arrived then)."""
    mask = tail(ts, scenario)
    jobs = _sum(ts, "arrivals", mask)
    return _sum(ts, "attempts", mask) / jobs if jobs else None


def calls_per_open_job(ts: pd.DataFrame, scenario) -> float | None:
    """Attempts in the tail over the jobs open in it: not finished (succeeded or
    dead-lettered) when it began, or arriving in it (None: no job open)."""
    mask = tail(ts, scenario)
    before = ~mask
    done = _sum(ts, "success", before) + _sum(ts, "failed_dlq", before)
    open_jobs = _sum(ts, "arrivals", before) - done + _sum(ts, "arrivals", mask)
    return _sum(ts, "attempts", mask) / open_jobs if open_jobs > 0 else None


def amplification(ts: pd.DataFrame, scenario) -> float | None:
    """The run's workload amplification figure: :func:`calls_per_open_job` for a model
    with an end of its own, else :func:`calls_per_job`."""
    return (calls_per_open_job if _open_ended(scenario) else calls_per_job)(ts, scenario)


def served(ts: pd.DataFrame, mask: np.ndarray) -> float:
    """Calls the tier served in *mask*'s bins: its successes, errors and wasted calls;
    with a cache the ``success`` column counts jobs, so the requests the cache answered
    (hits) and the coalesced waiters (answered by another's call) are taken out (a
    coalesced waiter whose call failed is taken out too: then a lower bound)."""
    jobs = _sum(ts, "success", mask) - _sum(ts, cache.HIT, mask) \
        - _sum(ts, "cache_coalesced", mask)
    return max(0.0, jobs) + _sum(ts, "errors", mask) + _sum(ts, "wasted", mask)


def capacity_ratio(ts: pd.DataFrame, scenario) -> float | None:
    """Calls served per busy slot-second while up in the tail, over 1 / service mean.
    None without a busy-slot gauge or a service rate, or when a slot was busy at fewer
    than half of the tail's bin starts while up: the gauge's samples then say little of
    the busy time (breaker.yaml: one busy sample in 11 read 36×), and a server that idle has
    capacity to spare, so it is not what holds the run down."""
    if "in_flight" not in ts or not downstreams.named(scenario.downstream.model).queueing:
        return None  # a service tier's frame; a model with no service rate (occ, broker)
    mask = tail(ts, scenario) & (ts["downstream_up"].to_numpy() > 0)
    gauge = ts["in_flight"].to_numpy()[mask]
    if not mask.any() or (gauge > 0).sum() < mask.sum() / 2:
        return None
    busy = float(gauge.sum()) * scenario.bin
    return served(ts, mask) / busy * scenario.downstream.service.mean


def down_fraction(ts: pd.DataFrame, scenario) -> float:
    """The share of the tail the server was down (its outages are over by then)."""
    mask = tail(ts, scenario)
    return float(1.0 - ts["downstream_up"].to_numpy()[mask].mean()) if mask.any() else 0.0


def trigger(scenario) -> float | None:
    """When the first trigger began: an outage (a flush is one), else a load spike."""
    first = scenario.first_outage_start
    if first is None:
        first = min((spike.at for spike in scenario.workload.spikes), default=None)
    return first


def tail_hit_rate(ts: pd.DataFrame, scenario) -> float | None:
    """The cache's hit rate over the tail (None: no cache, or no request then)."""
    if not cache.has_cache(ts):
        return None
    mask = tail(ts, scenario)
    hits = _sum(ts, cache.HIT, mask)
    total = hits + _sum(ts, cache.MISS, mask)
    return hits / total if total else None


def hit_rate_before(ts: pd.DataFrame, scenario, tier=None) -> float | None:
    """The cache's healthy hit rate: over the bins ending by the first trigger; for a
    cache that starts cold (it has no such window) the warm LRU's under independent
    requests, by Che's approximation (:mod:`herdsim.policies.cache.warm`). None: no
    cache, no trigger or no request before it, or a cold start Che does not cover."""
    cfg = getattr(tier or scenario.downstream, "cache", None)
    if not cache.has_cache(ts) or cfg is None:
        return None
    if not cfg.warm:
        return warm.lru_hit_rate(cfg)
    first = trigger(scenario)
    if first is None:
        return None
    before = ts["time"].to_numpy() + scenario.bin <= first + 1e-9
    hits = _sum(ts, cache.HIT, before)
    total = hits + _sum(ts, cache.MISS, before)
    return hits / total if total else None


def cold_cache(ts: pd.DataFrame, scenario, tier=None) -> bool:
    """Whether the tail's hit rate is below DEGRADATION of the one before the trigger."""
    now, then = tail_hit_rate(ts, scenario), hit_rate_before(ts, scenario, tier)
    return now is not None and then is not None and now < DEGRADATION * then


def _can_degrade(scenario) -> bool:
    """Whether the server has a mechanism that lowers what a busy slot serves (a
    ``degradation``, latency growing with load, refusals that take a slot): without one
    a low ratio is bins the server spent partly down, not a degradation."""
    ds = scenario.downstream
    overload = getattr(ds, "overload", None)
    refusals = getattr(ds, "refusal_cost", None)
    return getattr(ds, "degradation", None) is not None \
        or getattr(overload, "latency_per_call", 0) > 0 \
        or (refusals is not None and refusals.costs())


def sustained_by(ts: pd.DataFrame, scenario, tier=None) -> str:
    """The sustaining effects measured, joined with `` + ``, or ``none measured``; a
    cold cache's degradation says so in brackets (``capacity degradation (cold
    cache)``; a server that degrades too: ``(server, cold cache)``). *tier*: a call
    graph's service tier, *ts* its :func:`tier_frame`."""
    effects = []
    figure = amplification(ts, scenario) if tier is None else calls_per_job(ts, scenario)
    if figure is not None and figure > AMPLIFICATION:
        effects.append(AMPLIFIED)
    ratio = capacity_ratio(ts, scenario) if tier is None else None
    slower = ratio is not None and ratio < DEGRADATION and _can_degrade(scenario)
    cold = cold_cache(ts, scenario, tier)
    if slower or cold:
        effects.append(DEGRADED + (f" (server, {COLD})" if slower and cold
                                   else f" ({COLD})" if cold else ""))
    crashed = bool(_sum(ts, "crashes", tail(ts, scenario)))
    if crashed or down_fraction(ts, scenario) >= DOWN:
        effects.append(CRASHING)
    return " + ".join(effects) or NONE


def tier_frame(ts: pd.DataFrame, name: str, need: float, crashes, up: np.ndarray
               ) -> pd.DataFrame:
    """A call graph's service tier as the loops read it: its calls per bin
    (``attempts``), what the offered jobs need of it (``arrivals``: the run's arrivals
    times *need* calls per job), its successful calls, crashes (*crashes*: their times),
    whether it is up (*up*, per bin) and its cache's hits and misses."""
    times = ts["time"].to_numpy()
    width = float(times[1] - times[0]) if len(times) > 1 else 1.0
    index = np.clip((np.asarray(crashes, dtype=float) / width).astype(np.int64), 0,
                    max(len(times) - 1, 0))
    frame = {"time": times, "arrivals": ts["arrivals"].to_numpy() * need,
             "attempts": ts[f"{name}_calls"].to_numpy(),
             "success": ts[f"{name}_succeeded"].to_numpy(),
             "crashes": np.bincount(index, minlength=len(times)), "downstream_up": up}
    for column in (cache.HIT, cache.MISS):
        if f"{name}_{column}" in ts:
            frame[column] = ts[f"{name}_{column}"].to_numpy()
    return pd.DataFrame(frame)

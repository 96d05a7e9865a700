"""A cache in front of a tier, through whole runs: the warm hit rate against Che's
approximation, single-flight's invariant, every job ending in one place, a flush that
takes the hit rate to 0 and a cache that refills, and a graph's service with a cache."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_every_job_ends_in_one_place, graph, tiny
from scipy.optimize import brentq

import herdsim
from herdsim.config.loading import load_scenario
from herdsim.model import cache as model_cache
from herdsim.model.simulation import Simulation
from herdsim.outputs import compare_dir


def cached(**cache) -> dict:
    return {"size": 50, "keys": {"distribution": "zipf", "alpha": 0.8, "count": 500},
            **cache}


def che_hit_rate(p: np.ndarray, size: int) -> float:
    """Che's approximation of an LRU cache under independent requests: the
    characteristic time T with sum_k (1 - e^{-p_k T}) = size, and the hit rate
    sum_k p_k (1 - e^{-p_k T}) (Che, Tung and Wang 2002; Fricker, Robert and Roberts
    2012 show it is accurate within a percent or so at these sizes)."""
    t = brentq(lambda t: np.sum(1 - np.exp(-p * t)) - size, 1e-9, 1e12)
    return float(np.sum(p * (1 - np.exp(-p * t))))


def test_a_warm_lru_under_zipf_hits_as_che_predicts():
    """Open loop at 2,000/s for 30 s against a tier with room for every miss; the hit
    rate over the last 20 s (warm) within 0.015 of Che's (its error at 500 keys and 50
    entries is under 0.005; 40,000 requests add a standard error of 0.0025)."""
    data = tiny(duration="30s", workload={"rate": 2000}, workers={"count": None},
                downstream={"concurrency": 1000, "service": {"mean": "1ms"},
                            "cache": cached(warm=False)})
    res = herdsim.run(load_scenario(data))
    ts = res.timeseries[res.timeseries["time"] >= 10]
    measured = ts["cache_hits"].sum() / (ts["cache_hits"].sum() + ts["cache_misses"].sum())
    w = np.arange(1, 501, dtype=float) ** -0.8
    assert measured == pytest.approx(che_hit_rate(w / w.sum(), 50), abs=0.015)


def _flights(monkeypatch) -> list:
    """Record every flight's call to the tier: (key, sent, landed)."""
    log: list = []
    fly, landed = model_cache.Front._fly, model_cache.Front.landed

    def spy_fly(self, flight, timeout, register):
        refused = fly(self, flight, timeout, register)
        if refused is None:
            log.append([flight.key, self.env.now, None, flight])
        return refused

    def spy_landed(self, flight):
        for row in log:
            if row[3] is flight and row[2] is None:
                row[2] = self.env.now
        landed(self, flight)

    monkeypatch.setattr(model_cache.Front, "_fly", spy_fly)
    monkeypatch.setattr(model_cache.Front, "landed", spy_landed)
    return log


def _most_in_flight_per_key(log, end: float) -> int:
    most = 0
    for key in {row[0] for row in log}:
        events = sorted([(row[1], 1) for row in log if row[0] == key]
                        + [(row[2] if row[2] is not None else end, -1)
                           for row in log if row[0] == key], key=lambda e: (e[0], e[1]))
        level = 0
        for _, step in events:
            level += step
            most = max(most, level)
    return most


@pytest.mark.parametrize("coalesce", [True, False])
def test_single_flight_sends_at_most_one_call_per_key(monkeypatch, coalesce):
    """With coalesce, never two calls to the tier for one key at once, through a flush
    and a slow tier that queues; without it, hot keys do have several (the check can
    fail)."""
    log = _flights(monkeypatch)
    data = tiny(duration="6s", workload={"rate": 400}, workers={"count": None},
                downstream={"concurrency": 4, "service": {"mean": "50ms"}, "timeout": "1s",
                            "cache": cached(coalesce=coalesce, size=20),
                            "outages": [{"mode": "flush", "start": "2s", "duration": "1ms"}]})
    herdsim.run(load_scenario(data))
    most = _most_in_flight_per_key(log, 6.0)
    assert (most == 1) if coalesce else (most > 1)


@pytest.mark.parametrize("changes", [
    {"workers": {"count": None}, "downstream": {"cache": cached(coalesce=True)}},
    {"workers": {"count": 10}, "downstream": {"cache": cached(coalesce=True)}},
    {"workers": {"count": 10}, "downstream": {"cache": cached()}},
    {"workers": {"count": None}, "downstream": {"cache": cached(
        eviction={"policy": "ttl", "ttl": "200ms", "stale": "300ms"}, coalesce=True)}},
])
def test_every_job_ends_in_one_place_with_a_cache(changes):
    """Through a flush, a down outage (calls in flight fail together, coalesced waiters
    with them) and a slow tier with timeouts: no job lost, none finished twice."""
    data = tiny(duration="5s", workload={"rate": 300},
                downstream={"concurrency": 3, "service": {"mean": "30ms"}, "timeout": "200ms",
                            "outages": [{"mode": "flush", "start": "1s", "duration": "300ms"},
                                        {"mode": "down", "start": "2s", "duration": "500ms"}]})
    data = {**data, **{k: {**data.get(k, {}), **v} for k, v in changes.items()}}
    sim = Simulation(load_scenario(data))
    assert_every_job_ends_in_one_place(sim, sim.run())


def test_a_flush_takes_the_hit_rate_to_zero_and_the_cache_refills():
    """While the flush holds (1 s) no request hits; a second after it ends, the hit rate
    is back within 0.05 of its value before the flush (the tier has room for every
    miss, so the refill takes a few of the hot keys' inter-arrival times)."""
    data = tiny(duration="8s", bin="250ms", workload={"rate": 1000}, workers={"count": None},
                downstream={"concurrency": 200, "service": {"mean": "5ms"},
                            "cache": cached(),
                            "outages": [{"mode": "flush", "start": "3s", "duration": "1s"}]})
    ts = herdsim.run(load_scenario(data)).timeseries
    rate = ts["cache_hits"] / (ts["cache_hits"] + ts["cache_misses"])
    during = (ts["time"] >= 3) & (ts["time"] < 4)
    before = (ts["time"] >= 1) & (ts["time"] < 3)
    after = ts["time"] >= 5
    assert ts.loc[during, "cache_hits"].sum() == 0
    assert rate[before].mean() > 0.3
    assert abs(rate[after].mean() - rate[before].mean()) < 0.05


def test_a_hit_never_reaches_the_tier():
    """The tier's calls are the misses, and every request (a job's call) is a hit or a
    miss."""
    data = tiny(duration="3s", workload={"rate": 500}, workers={"count": None},
                downstream={"concurrency": 100, "service": {"mean": "1ms"}, "cache": cached()})
    res = herdsim.run(load_scenario(data))
    ts = res.timeseries
    assert ts["attempts"].sum() == ts["cache_misses"].sum() > 0
    assert ts["cache_hits"].sum() + ts["cache_misses"].sum() == res.jobs["attempts"].sum()


def test_a_service_tier_with_a_cache_counts_its_hits_and_misses():
    """A cache in front of db: its columns, and the calls reaching db are its misses."""
    data = graph(**{"services.db.cache": cached(size=100)})
    res = herdsim.run(load_scenario(data))
    ts = res.timeseries
    assert "cache_hits" not in ts  # the workers' downstream has none
    assert ts["db_calls"].sum() == ts["db_cache_misses"].sum() > 0
    assert ts["db_cache_hits"].sum() > 0
    db = res.summary["tiers"]["db"]
    assert db["cache_hit_rate"] == pytest.approx(
        ts["db_cache_hits"].sum() / (ts["db_cache_hits"].sum() + ts["db_cache_misses"].sum()))
    assert "cache_hit_rate" not in res.summary["tiers"]["api"]  # no cache there


def test_a_flush_outage_needs_a_cache():
    with pytest.raises(herdsim.ScenarioError, match="outages.0.mode: a flush outage needs "
                                                    "a cache"):
        load_scenario(tiny(downstream={"outages": [{"mode": "flush", "start": 1,
                                                    "duration": 1}]}))


def test_a_scenario_without_a_cache_has_no_cache_columns_or_kpis():
    res = herdsim.run(load_scenario(tiny()))
    assert not [c for c in res.timeseries if "cache" in c]
    assert not [k for k in res.summary if "cache" in k]


def test_arms_with_and_without_a_cache_option_compare(tmp_path):
    """An option only some arms have (coalescing's counter): 0 where absent, so the
    comparison's frames are whole numbers and it saves and reads back."""
    data = tiny(duration="2s", workers={"count": None},
                downstream={"cache": cached(size=20)})
    comparison = herdsim.compare(load_scenario(data),
                                 vary={"downstream.cache.coalesce": [False, True]},
                                 processes=1)
    ts = comparison.timeseries
    assert not ts["cache_coalesced"].isna().any()
    assert ts.loc[ts["arm"].str.endswith("=false"), "cache_coalesced"].sum() == 0
    compare_dir.save_comparison(comparison, tmp_path / "cmp")
    back = compare_dir.load_outputs(tmp_path / "cmp")
    assert back.timeseries["cache_coalesced"].sum() == ts["cache_coalesced"].sum()


def test_serving_stale_keeps_hits_through_expiry_with_one_refresh_per_key(monkeypatch):
    """A ttl of 50 ms at 500 requests/s over 50 keys: without stale most requests find
    their entry expired and miss; with stale: 1s they are served (counted in
    cache_stale) while at most one refresh per key is in flight."""
    log = _flights(monkeypatch)
    rates = {}
    for stale in ("0s", "1s"):
        data = tiny(duration="4s", workload={"rate": 500}, workers={"count": None},
                    downstream={"concurrency": 50, "service": {"mean": "20ms"},
                                "cache": {"size": 50, "keys": {"distribution": "uniform",
                                                               "count": 50},
                                          "eviction": {"policy": "ttl", "ttl": "50ms",
                                                       "stale": stale}}})
        ts = herdsim.run(load_scenario(data)).timeseries
        rates[stale] = ts["cache_hits"].sum() / (ts["cache_hits"].sum()
                                                 + ts["cache_misses"].sum())
        if stale == "1s":
            assert ts["cache_stale"].sum() > 0
            assert _most_in_flight_per_key(log, 4.0) == 1
        log.clear()
    assert rates["1s"] > rates["0s"] + 0.3


def test_a_cold_cache_starts_missing_and_fills():
    """warm: false: the first 100 ms hit far less than a warm cache's (200 entries over
    500 keys: the warm one holds the most popular); both end alike."""
    series = {}
    for warm in (True, False):
        data = tiny(duration="6s", bin="100ms", workload={"rate": 500}, workers={"count": None},
                    downstream={"concurrency": 100, "service": {"mean": "5ms"},
                                "cache": cached(warm=warm, size=200)})
        ts = herdsim.run(load_scenario(data)).timeseries
        series[warm] = (ts["cache_hits"] / (ts["cache_hits"] + ts["cache_misses"])).to_numpy()
    assert series[False][0] < series[True][0] - 0.1
    assert abs(series[False][-20:].mean() - series[True][-20:].mean()) < 0.05


def test_a_service_behind_its_cache_is_healthy_when_its_requests_are_served():
    """db answers about half its requests from its cache: its state counts them (its
    successful calls alone are half of what the jobs need of it: it would read
    degraded); a flush of its cache at 5 s is over well before the end."""
    data = {"name": "g", "duration": "20s", "seed": 2, "workload": {"rate": 200},
            "workers": {"count": 100},
            "retry": {"strategy": "full_jitter", "base": "100ms", "max_retries": 2},
            "downstream": {"name": "api", "concurrency": 50, "service": {"mean": "5ms"},
                           "timeout": "2s",
                           "calls": [{"service": "db", "timeout": "500ms",
                                      "retry": {"max_retries": 1, "base": "50ms"}}]},
            "services": {"db": {"concurrency": 4, "service": {"mean": "20ms"},
                                "cache": {"size": 300, "keys": {"distribution": "zipf",
                                                                "alpha": 0.9,
                                                                "count": 2000}},
                                "outages": [{"mode": "flush", "start": "5s",
                                             "duration": "1s"}]}}}
    res = herdsim.run(load_scenario(data))
    ts = res.timeseries
    assert ts["db_cache_hits"].sum() > 0.3 * ts["db_succeeded"].sum()
    assert res.summary["state"] == "recovered"
    assert res.summary["tiers"]["db"]["state"] == "recovered"


@pytest.mark.parametrize("replicas", [None, 3])
def test_a_flight_failed_together_is_not_settled_again_at_its_deadline(replicas):
    """A down outage fails a cached tier's calls together; each flight's call keeps its
    deadline, which fired later into the flight: behind a fleet the call was already let
    go (a KeyError in ``Fleet.finish``, the census's cache + replicas + outage), on one
    pool the tier counted the call's end twice (failed, then timed out)."""
    db = {"concurrency": 2, "service": {"mean": "50ms"}, "cache": cached(size=5),
          "outages": [{"mode": "down", "start": "1s", "duration": "500ms",
                       **({"replica": 1} if replicas else {})}]}
    if replicas:
        db["replicas"] = replicas
    data = graph(**{"services.db": db, "services.api.calls": [
        {"service": "db", "count": 3, "timeout": "400ms"}]})
    scenario = load_scenario(data)
    sim = Simulation(scenario)
    assert_every_job_ends_in_one_place(sim, sim.run())
    record = sim.tiers["db"]
    flights = len(record.optional["cache_misses"]) - len(record.optional.get("cache_coalesced", ()))
    ended = len(record.succeeded) + len(record.failed)
    assert ended <= flights, f"{ended} ends of {flights} flights"


def test_a_services_flush_has_its_refill_time_in_its_tier():
    """db's cache (20 keys, all held) flushed at 2 s: its tier gives the refill time, a
    whole number of 250 ms bins after the flush and within a second (db has room for
    every miss and 20 keys refill at their first miss: a bin or two); the run's own
    cache_refill_time is the top tier's (none here), and a cache without a flush has none."""
    keys = {"size": 20, "keys": {"distribution": "uniform", "count": 20}}
    res = herdsim.run(load_scenario(graph(**{
        "bin": "250ms", "workload.rate": 100, "workload.profile": [
            {"at": 0, "rate": 100}, {"at": "4s", "rate": 0}],
        "services.db.cache": keys,
        "services.db.outages": [{"mode": "flush", "start": "2s", "duration": "1ms"}]})))
    refill = res.summary["tiers"]["db"]["cache_refill_time"]
    assert 0 < refill <= 1.0 and (refill / 0.25) == pytest.approx(round(refill / 0.25))
    assert "cache_refill_time" not in res.summary
    unflushed = herdsim.run(load_scenario(graph(**{"services.db.cache": keys})))
    assert "cache_refill_time" not in unflushed.summary["tiers"]["db"]

"""Which loop holds it down: each effect named on a run known to be held down by it, the
figures against their definitions, and healthy runs' summaries without the keys; the
broker's state and loops, a cache's, a call graph's headline tier's; and a property over
generated scenarios: every held-down run names its loops, by its own figures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from scenario_gen import repaired, scenarios

import herdsim
from herdsim.analysis import cache as cache_analysis
from herdsim.analysis import loops
from herdsim.analysis.metastability import TAIL_FRACTION
from herdsim.planning.estimate import estimate
from herdsim.policies import downstreams
from herdsim.policies.cache import warm

BUNDLED = Path(herdsim.__file__).parent / "scenarios"
SHORT = {"duration": "30s"}  # past each trigger (at 10 s), the tail is 27-30 s


def summary(name: str, **overrides) -> dict:
    return herdsim.run(herdsim.load_scenario(BUNDLED / f"{name}.yaml",
                                                 {**SHORT, **overrides})).summary


def test_metastable_yaml_is_held_down_by_retries_alone():
    """metastable.yaml: the healthy server (capacity unchanged) is kept full by retries
    (its comments: ~2,500 calls/s for 700 jobs/s)."""
    s = summary("metastable")
    assert s["state"] == "metastable"
    assert s["sustained_by"] == "workload amplification"
    assert s["tail_calls_per_job"] > loops.AMPLIFICATION
    assert s["tail_capacity_ratio"] == pytest.approx(1.0, abs=0.1)  # serves at full speed


def test_gc_yaml_is_held_down_by_its_degraded_capacity_even_without_retries():
    """gc.yaml without retries: still stuck, and only capacity degradation is named: the
    ratio is 1 / max_factor (every call served at the capped factor)."""
    s = summary("gc", **{"retry.max_retries": 0})
    assert s["state"] == "metastable"
    assert s["sustained_by"] == "capacity degradation"
    assert s["tail_capacity_ratio"] == pytest.approx(1 / 10, rel=0.05)
    assert s["degradation_end"] == s["degradation_peak"] == 10


def test_crashes_in_the_tail_are_named():
    """admission.yaml (exponential, no jitter) crashes again and again after its outage."""
    s = herdsim.run(herdsim.load_scenario(BUNDLED / "admission.yaml")).summary
    assert s["state"] == "metastable" and s["collapses_after_outage"] > 0
    assert "crash-restart cycles" in s["sustained_by"]


def test_refusals_that_take_the_slots_are_a_capacity_degradation():
    """gc.yaml without its degradation, shedding every call beyond 200 waiting: free
    refusals recover it; at 100 ms a shed call (a service's time) the retrying workers'
    refusals take every slot, nothing is served per busy slot (ratio 0), and the server
    is named degraded though it has no degradation section (it was not: only a
    ``degradation`` or ``latency_per_call`` counted)."""
    shed = {"downstream.degradation": None, "downstream.shedding.above": 200,
            "downstream.shedding.probability": 0}
    assert summary("gc", **shed, **{"downstream.refusal_cost.shed": "0ms"})["state"] == \
        "recovered"
    s = summary("gc", **shed, **{"downstream.refusal_cost.shed": "100ms"})
    assert s["state"] == "metastable"
    assert s["tail_capacity_ratio"] < loops.DEGRADATION
    assert "capacity degradation" in s["sustained_by"]


def test_a_healthy_run_has_no_such_keys():
    """gc.yaml's spike against a server that does not degrade: recovered, none of them."""
    s = summary("gc", **{"downstream.degradation": None})
    assert s["state"] == "recovered"
    assert not {"sustained_by", "tail_calls_per_job", "tail_capacity_ratio",
                "tail_down_fraction"} & set(s)


def frame(n: int = 100, **columns) -> pd.DataFrame:
    base = {"time": np.arange(n) * 0.1, "arrivals": 10, "attempts": 10, "success": 10,
            "errors": 0, "wasted": 0, "in_flight": 1.0, "downstream_up": 1.0, "crashes": 0}
    return pd.DataFrame({**base, **columns})


class Scn:
    """The fields the tail figures read."""
    duration, bin, last_outage_end = 10.0, 0.1, None

    class downstream:  # noqa: N801 (a scenario's section)
        model = "queue"
        degradation = "gc"  # a server that can degrade (the rule names it only then)

        class service:  # noqa: N801
            mean = 0.1


def test_the_figures_are_their_definitions():
    """10 calls a bin for 10 jobs, one slot busy serving 10 calls a 0.1 s bin = 100 calls
    per slot-second, at 0.1 s a call: ratio 10 (the gauge is a sample); thresholds
    crossed one by one."""
    assert loops.calls_per_job(frame(), Scn) == 1.0
    assert loops.capacity_ratio(frame(in_flight=10.0), Scn) == pytest.approx(1.0)
    assert loops.sustained_by(frame(in_flight=10.0), Scn) == loops.NONE
    assert loops.sustained_by(frame(in_flight=10.0, attempts=16), Scn) == \
        "workload amplification"
    assert loops.sustained_by(frame(in_flight=20.0), Scn) == "capacity degradation"

    class Plain(Scn):  # no mechanism lowers what a slot serves: a low ratio is downtime
        class downstream(Scn.downstream):  # noqa: N801
            degradation = None

            class overload:  # noqa: N801
                latency_per_call = 0.0

    assert loops.sustained_by(frame(in_flight=20.0), Plain) == loops.NONE
    down = frame(in_flight=10.0, downstream_up=np.r_[np.ones(95), np.zeros(5)])
    assert loops.down_fraction(down, Scn) == pytest.approx(0.5)
    assert loops.sustained_by(down, Scn) == "crash-restart cycles"


def test_calls_per_open_job_counts_the_jobs_not_finished_when_the_tail_began():
    """10 jobs arrive in the first bin and none finishes; the tail (the last 10 bins)
    holds 30 calls and 5 new jobs: 30 / (10 + 5) = 2. Two finished before it: 30 / 13."""
    arrivals = np.zeros(100)
    arrivals[0], arrivals[95] = 10, 5
    attempts = np.zeros(100)
    attempts[90:] = 3
    ts = frame(arrivals=arrivals, attempts=attempts, success=0, failed_dlq=0)
    assert loops.calls_per_open_job(ts, Scn) == pytest.approx(2.0)
    success = np.zeros(100)
    success[50] = 2
    assert loops.calls_per_open_job(ts.assign(success=success), Scn) == pytest.approx(30 / 13)


def test_a_cache_run_counts_calls_served_at_the_tier_not_hits():
    """Per bin 50 jobs succeed, 45 of them hits and 3 coalesced waiters: the tier served
    2 successes and 1 wasted call, 3 a 0.1 s bin: with 3 slots busy that is 10 per
    slot-second, 1 at a 0.1 s service (counting the jobs, 51 a bin: 17)."""
    ts = frame(success=50, cache_hits=45, cache_misses=5, cache_coalesced=3, wasted=1,
               in_flight=3.0)
    assert loops.capacity_ratio(ts, Scn) == pytest.approx(1.0)


def test_a_slot_busy_at_few_bin_starts_is_not_measured():
    """breaker.yaml's tail: one busy sample in 11 up bins read 36x (the gauge says little
    of the busy time, and a server that idle is not what holds the run down)."""
    in_flight = np.zeros(100)
    in_flight[95] = 1.0
    assert loops.capacity_ratio(frame(in_flight=in_flight), Scn) is None
    s = herdsim.run(herdsim.load_scenario(BUNDLED / "breaker.yaml")).summary
    assert s["state"] != "recovered" and s.get("tail_capacity_ratio") is None


def reconnect(strategy: str = "fixed", **overrides) -> dict:
    return herdsim.run(herdsim.load_scenario(
        BUNDLED / "reconnect.yaml", {"retry.strategy": strategy, **overrides})).summary


def test_a_broker_that_crashes_at_every_reconnect_wave_is_metastable_and_says_why():
    """reconnect.yaml, fixed 2 s reconnects: after the 1 s blip every wave crashes the
    broker, no client is back by the end. The trigger ended and it stays down: metastable
    (it read degraded), held down by its reconnects (in the 4 s tail each of the 3,000
    disconnected clients connects every 2 s: 4 / 2 = 2 connects per open job) and by its
    crash-restart cycles (a crash in the tail; down 3 s after each wave)."""
    s = reconnect()
    assert s["reconnect_time"] is None and s["collapses_after_outage"] > 0
    assert s["state"] == "metastable"
    tail_seconds = TAIL_FRACTION * 40.0
    assert s["tail_calls_per_open_job"] == pytest.approx(tail_seconds / 2.0)
    assert s["sustained_by"] == "workload amplification + crash-restart cycles"
    assert s["tail_down_fraction"] >= loops.DOWN
    assert "tail_calls_per_job" not in s and "tail_capacity_ratio" not in s


def test_a_broker_still_reconnecting_at_the_end_is_degraded():
    """No crash rule, full jitter, the run stopped 3 s after the blip: clients are still
    coming back (connects accepted in the tail), nothing collapsed: degraded, not
    metastable; with the run long enough it is recovered, and names nothing."""
    s = reconnect("full_jitter", duration="9s", **{"downstream.overload.collapse": None})
    assert s["reconnect_time"] is None and s["state"] == "degraded"
    assert "sustained_by" in s
    done = reconnect("full_jitter", **{"downstream.overload.collapse": None})
    assert done["state"] == "recovered" and not set(loops.KEYS) & set(done)


def test_a_cold_cache_is_named_and_the_ratio_counts_the_tiers_calls():
    """cache.yaml (coalescing off): the warm cache holds every one of the 100 keys, so
    before the flush every request hits (1.0); after it the database, saturated (10
    slots of 100 ms busy all the time), serves at its healthy rate: ratio 1 (it read 8.9
    counting hits as served calls), and the hit rate in the tail stays below 0.8 of 1."""
    s = herdsim.run(herdsim.load_scenario(BUNDLED / "cache.yaml")).summary
    assert s["state"] in ("degraded", "metastable")
    assert s["hit_rate_before"] == 1.0
    assert s["tail_hit_rate"] < loops.DEGRADATION * s["hit_rate_before"]
    assert s["tail_capacity_ratio"] == pytest.approx(1.0, abs=0.1)
    assert s["sustained_by"] == "capacity degradation (cold cache)"


def cold_start(**overrides):
    return herdsim.run(herdsim.load_scenario(BUNDLED / "cache.yaml", {
        "downstream.cache.warm": False, "downstream.outages": [], **overrides}))


def test_a_cold_start_is_held_to_the_warm_lrus_hit_rate():
    """warm: false: the run starts in its trigger, with no window before it; the
    reference is the warm LRU's hit rate (Che's approximation): 1 for a cache as large as
    the key space. cache.yaml's database never lets it fill: a cold cache. A TTL cache has
    no such reference: not measured, not named."""
    s = cold_start().summary
    assert s["state"] != "recovered"
    assert s["hit_rate_before"] == 1.0
    assert s["sustained_by"] == "capacity degradation (cold cache)"
    ttl = cold_start(**{"downstream.cache.eviction": {"policy": "ttl", "ttl": "60s"}}).summary
    assert ttl["state"] != "recovered"  # as cold: a 60 s TTL expires nothing in the run
    assert ttl["hit_rate_before"] is None and loops.COLD not in ttl["sustained_by"]


def test_the_cold_start_reference_is_what_a_warm_lru_reaches():
    """Che's approximation against the simulated LRU it stands for: 20 entries over
    cache.yaml's 100 Zipf(1.3) keys, a tier with room for every miss (no retry, no
    timeout reached): the hit rate from 10 s on is Che's within 0.03 (its error for LRU
    under independent Zipf requests is about a percent, Fricker et al. 2012; the misses
    fill 100 ms late, which costs a little more; 50,000 requests: a standard error of
    0.002). Uniform keys: exactly size / count."""
    big = {"downstream.cache.size": 20, "downstream.concurrency": 2000,
           "downstream.queue_limit": None}
    run = cold_start(**big)
    sc = run.scenario
    assert abs(cache_analysis.overall(run.timeseries, 10.0)
               - warm.lru_hit_rate(sc.downstream.cache)) < 0.03
    assert warm.che_hit_rate(np.full(100, 0.01), 20) == pytest.approx(0.2)


def test_a_call_graphs_loops_are_its_headline_tiers():
    """layers.yaml: the database is the headline (metastable, crashing); the summary's
    loops are its own (named from its calls and its down time), not the frontend's (whose
    slots wait on the tiers below: a busy-slot ratio of 0.003, and "none measured")."""
    s = herdsim.run(herdsim.load_scenario(BUNDLED / "layers.yaml")).summary
    tier = s["tiers"][s["headline_tier"]]
    assert s["headline_tier"] != next(iter(s["tiers"]))
    for key in loops.KEYS:
        assert s.get(key) == tier.get(key), key
    assert "crash-restart cycles" in s["sustained_by"]
    assert "tail_capacity_ratio" not in s


PROFILE = int(os.environ.get("HERDSIM_SCENARIOS", "40"))
MAX_CALLS = 150_000  # as test_any_scenario: each run well under a second


def _crashed_in_tail(res, s: dict) -> bool:
    """A crash of the headline tier in a bin of the tail."""
    sc = res.scenario
    start = max(sc.last_outage_end or 0.0, sc.duration * (1 - TAIL_FRACTION))
    tier = s.get("headline_tier")
    crashes = res.crash_times if tier is None or tier == next(iter(s["tiers"])) \
        else res.tier_crashes.loc[res.tier_crashes["tier"] == tier, "time"].to_numpy()
    bins = np.floor(np.asarray(crashes, dtype=float) / sc.bin) * sc.bin
    return bool((bins >= start - 1e-9).any())


@pytest.mark.slow
@settings(max_examples=PROFILE, deadline=None, derandomize=PROFILE <= 200, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(st.data())
def test_every_held_down_run_names_its_loops_by_its_own_figures(data):
    """Over generated scenarios (every model, graphs, caches, fleets, degradation,
    refusal costs, open and closed loop): a run has ``sustained_by`` exactly when its
    state is degraded or metastable, and each effect it names (or leaves out) agrees with
    its own tail figures and the documented thresholds; a model with an end of its own
    that is degraded is still serving in its tail and did not collapse again."""
    scenario = repaired(data.draw(scenarios(), label="scenario"), data.draw)
    assume(scenario is not None)
    assume(estimate(scenario).calls <= MAX_CALLS)
    res = herdsim.run(scenario)
    s = res.summary
    event(f"{s['state']}, model {scenario.downstream.model}, {len(s.get('tiers', ())) or 1} "
          f"tier(s){', a cache' if 'cache_hits' in res.timeseries else ''}")
    if s["state"] != "recovered":
        event(f"held down by {s['sustained_by']}")
    if s["state"] == "recovered":
        assert not set(loops.KEYS) & set(s)
        return
    named = s["sustained_by"]
    effects = [] if named == loops.NONE else named.split(" + ")
    assert all(e.split(" (")[0] in (loops.AMPLIFIED, loops.DEGRADED, loops.CRASHING)
               for e in effects), named
    figure = s.get("tail_calls_per_job", s.get("tail_calls_per_open_job"))
    assert (loops.AMPLIFIED in effects) == (figure is not None
                                             and figure > loops.AMPLIFICATION), s
    now, then = s.get("tail_hit_rate"), s.get("hit_rate_before")
    cold = now is not None and then is not None and now < loops.DEGRADATION * then
    assert (loops.COLD in named) == cold, s
    ratio = s.get("tail_capacity_ratio")
    server = loops.DEGRADED in named and (not cold or "(server" in named)
    if server:
        assert ratio is not None and ratio < loops.DEGRADATION, s
    crashing = s["tail_down_fraction"] >= loops.DOWN or _crashed_in_tail(res, s)
    assert (loops.CRASHING in effects) == crashing, s
    if downstreams.named(scenario.downstream.model).done_when and s["state"] == "degraded":
        tail = res.timeseries["time"].to_numpy() >= max(
            scenario.last_outage_end or 0.0, scenario.duration * (1 - TAIL_FRACTION))
        assert not s.get("collapses_after_outage")
        assert res.timeseries["success"].to_numpy()[tail].sum() > 0

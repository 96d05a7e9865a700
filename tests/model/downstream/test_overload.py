"""Overload physics of the downstream (docs/model.md, "Downstream"): service time growing
with concurrency, client timeouts and the work the server finishes for nobody, the
waiting-room limit, crash-and-restart, serving abandoned calls.

Most tests are event logs, as in SimPy's own tests: a backlog of jobs at t = 0 (no later
arrivals), constant service times, and the exact times at which each rule must fire.
"""

from __future__ import annotations

import numpy as np
import pytest

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.results.result import Result


def scripted(make_scenario, jobs: int, workers: int, **changes) -> dict:
    """*jobs* jobs queued at t = 0 and no other arrival; no retries; constant service."""
    fields = {"duration": "3s",
              "workload": {"arrivals": "constant", "rate": 0.001, "backlog": jobs},
              "workers": {"count": workers}, "retry": {"strategy": "fixed", "max_retries": 0}}
    for key, value in changes.items():
        fields[key] = {**fields[key], **value} if isinstance(value, dict) and key in fields \
            else value
    data = make_scenario(**fields)
    data["downstream"].setdefault("service", {})["distribution"] = "constant"
    return data


def simulate(data: dict) -> tuple[Simulation, herdsim.Result]:
    sim = Simulation(herdsim.load_scenario(data))
    return sim, Result.from_finished(sim.run())


def times(values) -> list[float]:
    return [round(t, 9) for t in sorted(values)]


# -- service time growing with concurrency --------------------------------------------------


@pytest.mark.parametrize("workers", [1, 4, 10])
def test_latency_per_call_slows_service_with_the_calls_in_service(make_scenario, workers):
    """W workers keep W of 10 slots busy: every call starts with b = W calls in service
    (itself included), so service = 10 ms + 5 ms * W and the throughput is
    W / (10 ms + 5 ms * W) -- the summary's capacity_rate when W = concurrency.
    Deterministic; the tolerance (1%) covers only the ramp at t = 0."""
    _, result = simulate(scripted(
        make_scenario, 2000, workers,
        downstream={"concurrency": 10, "service": {"mean": "10ms"},
                    "overload": {"latency_per_call": "5ms"}}))
    done = result.jobs.query("outcome == 'succeeded'")
    rate = len(done.query("finish >= 1 and finish < 3")) / 2.0
    assert rate == pytest.approx(workers / (0.010 + 0.005 * workers), rel=0.01)
    if workers == 10:
        assert result.summary["capacity_rate"] == pytest.approx(10 / 0.060)


# -- client timeouts and wasted work ------------------------------------------------------------


def test_no_waste_when_the_server_answers_before_the_timeout(make_scenario):
    sim, result = simulate(scripted(
        make_scenario, 200, 5,
        downstream={"concurrency": 5, "service": {"mean": "10ms"}, "timeout": "11ms"}))
    assert result.summary["timeouts_total"] == 0 and result.summary["wasted_total"] == 0
    assert result.summary["jobs_succeeded"] == 200


def test_a_doomed_call_times_out_at_its_deadline_and_is_wasted_when_served(make_scenario):
    """Service 100 ms, timeout 50 ms, ample slots, one worker: calls at 0, 50, 100 ms...
    each times out 50 ms after it was made, and the server finishes it 100 ms after,
    counted in ``wasted`` then."""
    sim, result = simulate(scripted(
        make_scenario, 20, 1, duration="0.52s",
        downstream={"concurrency": 50, "service": {"mean": "100ms"}, "timeout": "50ms"}))
    rec = sim.recorder
    calls = np.asarray(rec.attempts)
    assert times(calls) == times(0.05 * np.arange(11))
    assert times(rec.timeouts) == times(t + 0.05 for t in calls if t + 0.05 < 0.52)
    assert times(rec.wasted) == times(t + 0.1 for t in calls if t + 0.1 < 0.52)
    assert result.summary["jobs_succeeded"] == 0


@pytest.mark.parametrize(("serve_abandoned", "wasted"), [(False, [0.2]), (True, [0.2, 0.3])])
def test_abandoned_waiting_calls_are_dropped_or_served_for_nobody(make_scenario,
                                                                  serve_abandoned, wasted):
    """One slot, service 100 ms, timeout 150 ms, three calls at t = 0.
    A is served 0-0.1 (success). B starts at 0.1, would end at 0.2 > its 0.15 deadline:
    doomed, times out at 0.15, wasted at 0.2. C is still waiting at 0.15: abandoned,
    times out then; dropped when its turn comes, or (serve_abandoned) served 0.2-0.3
    and wasted at 0.3."""
    sim, result = simulate(scripted(
        make_scenario, 3, 3, duration="1s",
        downstream={"concurrency": 1, "service": {"mean": "100ms"}, "timeout": "150ms",
                    "serve_abandoned": serve_abandoned}))
    rec = sim.recorder
    assert times(rec.attempts) == [0.0, 0.0, 0.0]
    assert times(rec.timeouts) == [0.15, 0.15]
    assert times(rec.wasted) == wasted
    s = result.summary
    assert (s["jobs_succeeded"], s["jobs_dead_lettered"]) == (1, 2)


# -- waiting room ----------------------------------------------------------------------------------


@pytest.mark.parametrize("room", [0, 2])
def test_the_waiting_room_rejects_beyond_queue_limit(make_scenario, room):
    """Five calls at t = 0, one slot, ``queue_limit`` seats: 1 + room are admitted (served
    one per second), the rest are rejected at once and dead-lettered."""
    sim, result = simulate(scripted(
        make_scenario, 5, 5, duration="4s",
        downstream={"concurrency": 1, "queue_limit": room, "service": {"mean": "1s"}}))
    assert times(sim.recorder.rejected) == [0.0] * (4 - room)
    done = result.jobs.query("outcome == 'succeeded'")
    assert times(done["finish"]) == [1.0 + i for i in range(1 + room)]
    assert result.summary["jobs_dead_lettered"] == 4 - room


# -- collapse: crash and restart ------------------------------------------------------------------


@pytest.mark.parametrize(("calls", "crashes"), [(6, 0), (7, 1)])
def test_more_than_threshold_calls_in_the_window_crash_it(make_scenario, calls, crashes):
    """threshold 6 within 100 ms: six calls at once are fine, a seventh crashes it."""
    sim, result = simulate(scripted(
        make_scenario, calls, calls, duration="1s",
        downstream={"concurrency": 20, "service": {"mean": "50ms"},
                    "overload": {"collapse": {"window": "100ms", "threshold": 6,
                                              "restart_time": "500ms"}}}))
    assert times(sim.recorder.crashes) == [0.0] * crashes
    assert result.summary["jobs_succeeded"] == (0 if crashes else calls)


@pytest.mark.parametrize(("calls", "crashes"), [(5, 0), (6, 1)])
def test_load_limit_crashes_it_when_calls_in_service_and_waiting_reach_it(make_scenario,
                                                                          calls, crashes):
    """load_limit 5 with 2 slots: 2 serving + 3 waiting is fine; a sixth call arriving to
    a load of 5 crashes it."""
    sim, _ = simulate(scripted(
        make_scenario, calls, calls, duration="1s",
        downstream={"concurrency": 2, "service": {"mean": "500ms"},
                    "overload": {"collapse": {"load_limit": 5, "restart_time": "1s"}}}))
    assert times(sim.recorder.crashes) == [0.0] * crashes


def test_a_crash_fails_every_call_and_restarts_after_restart_time(make_scenario):
    """Seven calls at t = 0 crash it (threshold 6): all seven fail at 0 together and the
    downstream is down (``downstream_up`` = 0) until restart_time = 1 s, so their retries
    at 0.5 s are rejected at once; a job arriving at 1.5 s is served (50 ms)."""
    data = scripted(
        make_scenario, 7, 7, duration="2s", bin="100ms",
        workload={"rate": 1 / 1.5},
        downstream={"concurrency": 20, "service": {"mean": "50ms"},
                    "overload": {"collapse": {"window": "100ms", "threshold": 6,
                                              "restart_time": "1s"}}},
        retry={"strategy": "fixed", "base": "500ms", "max_retries": 1})
    sim, result = simulate(data)
    assert times(sim.recorder.crashes) == [0.0]
    assert times(sim.recorder.rejected) == [0.0] + [0.5] * 7  # the trigger, then fast fails
    ts = result.timeseries
    up = ts.set_index(ts["time"].round(6))["downstream_up"]
    assert (up.loc[0.1:0.9] == 0).all() and (up.loc[1.1:] == 1).all()
    jobs = result.jobs.set_index("job")
    assert (jobs.loc[:6, "outcome"] == "dead_lettered").all()
    assert jobs.loc[7, "outcome"] == "succeeded" and round(jobs.loc[7, "finish"], 9) == 1.55


# -- an outage lasting to the end of the run ----------------------------------------------------


def test_an_outage_until_the_end_of_the_run_is_summarised(make_scenario):
    """A mild error outage (5%) until the very end leaves the last bins healthy; the
    summary must still be computed (recovery_time: the run never saw the outage end, so
    there is nothing to recover from yet -- None or 0, but no crash)."""
    data = make_scenario(
        duration="4s", workload={"rate": 500}, workers={"count": 50},
        downstream={"concurrency": 50, "service": {"mean": "5ms"},
                    "outages": [{"start": "2s", "duration": "2s", "mode": "error",
                                 "error_rate": 0.05}]})
    result = herdsim.run(herdsim.load_scenario(data))
    assert result.summary["recovery_time"] in (None, 0.0)

"""The fluid model's integration held to queueing theory and to its own invariants."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tiny

from herdsim.config.loading import load_scenario
from herdsim.fluid import inputs
from herdsim.fluid.integrate import integrate


def flows_of(data: dict):
    sc = load_scenario(data)
    grid = inputs.build(sc, inputs.step_for(sc))
    return sc, grid, integrate(sc, grid)


def steady(**changes) -> dict:
    """500 jobs/s into 20 slots x 20 ms (1,000 calls/s), ample workers, 20 s."""
    base = tiny(duration="20s", workload={"arrivals": "constant", "rate": 500},
                workers={"count": 200},
                downstream={"concurrency": 20, "queue_limit": 50, "timeout": "1s"})
    return {**base, **changes}


def test_a_healthy_downstream_serves_the_offered_rate_with_littles_law_in_service():
    sc, grid, f = flows_of(steady())
    late = slice(grid.n // 2, None)  # past the first service times
    served_rate = f.success[late].sum() / (grid.n // 2 * grid.dt)
    assert served_rate == pytest.approx(500, rel=1e-3)
    # Little: calls in service = arrival rate x mean service = 500 x 20 ms = 10
    assert f.in_flight[late].mean() == pytest.approx(10, rel=1e-2)
    assert f.retry.sum() < 1e-6 and f.rejected.sum() == 0


def test_every_job_is_accounted_for_once_it_has_settled():
    data = steady()
    data["downstream"]["outages"] = [{"start": "2s", "duration": "1s", "mode": "down"}]
    data["retry"] = {"strategy": "fixed", "base": "200ms", "max_retries": 3}
    sc, grid, f = flows_of(data)
    ended = f.success.sum() + f.failed_dlq.sum()
    # what has not ended by the end: the queue, the calls in flight, the sleepers
    left = f.queue_depth[-1] + f.in_flight[-1] + f.waiting[-1] + f.delayed[-1]
    assert ended + left == pytest.approx(grid.jobs.sum(), rel=1e-3)
    # a 1 s outage, retried every 200 ms three times: those failing 4 times in a row
    # (at t0, 0.2, 0.4, 0.6 s) are dead-lettered: about 0.4 s of arrivals plus the calls
    # in flight at t0 (Little: 10); a few more whose retries meet the full room of the
    # herd after it (the freed workers' first tries take the places first)
    floor = 0.4 * 500 + 10
    assert floor * 0.99 <= f.failed_dlq.sum() <= floor * 1.1


def test_a_fixed_sleep_keeps_the_herd_a_delta_and_full_jitter_spreads_it():
    data = steady()
    data["downstream"]["outages"] = [{"start": "5s", "duration": "50ms", "mode": "down"}]
    data["downstream"]["queue_limit"] = None
    data["workers"] = {"count": 5000}
    herds = {}
    for strategy in ("fixed", "full_jitter"):
        data["retry"] = {"strategy": strategy, "base": "1s", "max_retries": 3}
        sc, grid, f = flows_of(data)
        t0 = int(round(5.0 / grid.dt))
        failed_at_t0 = f.retry[t0:t0 + int(0.05 / grid.dt)].sum()
        landing = f.attempts[t0 + 1:t0 + int(1.2 / grid.dt)] - 500 * grid.dt
        herds[strategy] = (failed_at_t0, landing.max(), landing.sum())
    failed, peak, total = herds["fixed"]
    # the 10 calls in flight at t0 (Little), the 1 arriving in its step and the 24 more
    # arriving while down, each slept exactly 1 s: those failed at t0 land together in one
    # step (within one step's arrivals, 500/s x 2 ms: the grid's resolution)
    step_arrivals = 500 * grid.dt
    assert abs(failed - (10 + 25)) <= step_arrivals
    assert abs(peak - (10 + 1)) <= step_arrivals
    jittered_failed, jittered_peak, jittered_total = herds["full_jitter"]
    assert jittered_total == pytest.approx(jittered_failed, rel=0.05)  # all land by 1.2 s
    # U(0, 1 s) on a 2 ms grid: 1/500 of the cohort per step
    assert jittered_peak < 0.05 * peak


def test_the_model_is_homogeneous_in_the_population():
    """Scaling arrivals, workers, slots, the room and the crash threshold by 1,000 scales
    every flow by 1,000 on the same grid: the cost is the steps, not the population."""
    small = tiny(duration="10s", workload={"arrivals": "constant", "rate": 70},
                 workers={"count": 30},
                 downstream={"concurrency": 20, "queue_limit": 10, "timeout": "2s",
                             "service": {"distribution": "exponential", "mean": "200ms"},
                             "outages": [{"start": "3s", "duration": "1s", "mode": "down"}],
                             "overload": {"collapse": {"window": "100ms", "threshold": 20,
                                                       "restart_time": "1s"}}})
    large = tiny(duration="10s", workload={"arrivals": "constant", "rate": 70_000},
                 workers={"count": 30_000},
                 downstream={"concurrency": 20_000, "queue_limit": 10_000, "timeout": "2s",
                             "service": {"distribution": "exponential", "mean": "200ms"},
                             "outages": [{"start": "3s", "duration": "1s", "mode": "down"}],
                             "overload": {"collapse": {"window": "100ms",
                                                       "threshold": 20_000,
                                                       "restart_time": "1s"}}})
    _, g_small, f_small = flows_of(small)
    _, g_large, f_large = flows_of(large)
    assert g_small.n == g_large.n
    assert np.allclose(f_large.success, 1000 * f_small.success, rtol=1e-6, atol=1e-6)
    assert f_large.crashes.sum() == f_small.crashes.sum()


def test_a_crash_fails_everything_and_holds_the_downstream_down_for_its_restart():
    data = steady()
    data["downstream"]["outages"] = [{"start": "2s", "duration": "1s", "mode": "down"}]
    data["downstream"]["overload"] = {"collapse": {"window": "100ms", "threshold": 60,
                                                   "restart_time": "2s"}}
    data["retry"] = {"strategy": "fixed", "base": "1s", "max_retries": 5}
    sc, grid, f = flows_of(data)
    crashes = np.flatnonzero(f.crashes)
    assert crashes.size >= 1
    first = crashes[0]
    restart = int(round(2.0 / grid.dt))
    assert not f.downstream_up[first + 1:first + restart].any()
    assert f.success[first + 1:first + restart].sum() == 0


def test_a_herd_a_closing_breaker_lets_go_is_cut_where_the_breaker_trips_again(
        scenarios_dir):
    """breaker.yaml: the pool's breaker closes and every held worker calls in the same
    instant. The crash rule lets in its threshold (150 in 100 ms), the next calls fail at
    once, and the breaker, its window cleared when it closed, trips again once it has
    heard minimum_calls (20) of them, holding the rest: 170 calls, a deterministic cohort
    (no bunching correction on top). The fluid let the whole herd go (300) before."""
    from herdsim.fluid import peaks

    sc = load_scenario(scenarios_dir / "breaker.yaml", {"retry.strategy": "fixed"})
    grid = inputs.build(sc, inputs.step_for(sc))
    f = integrate(sc, grid)
    herd = sc.downstream.overload.collapse.threshold + sc.breaker.minimum_calls
    released = np.flatnonzero((f.breaker_open[:-1] == 1) & (f.breaker_open[1:] == 0)) + 1
    crashed = [i for i in released if f.crashes[i]]
    assert len(crashed) >= 3
    load = peaks.sliding(f.attempts, int(round(0.1 / grid.dt)))
    for i in crashed:
        assert load[i] == pytest.approx(herd, abs=1e-6)
        assert f.short_circuited[i] > 0  # the rest of the herd: held again
    peak = peaks.peak(f.attempts, f.randomised, sc, grid.dt)
    assert peak.mean == pytest.approx(herd, abs=1e-6)
    assert peak.corrected <= 1.05 * herd


@pytest.mark.slow
def test_the_simulations_herd_at_a_closing_breaker_is_the_same_cut(scenarios_dir):
    """The simulation under the same rules: its busiest instant holds the threshold plus
    minimum_calls calls, every time the breaker lets go and the herd crashes it."""
    from herdsim.results.result import run

    sc = load_scenario(scenarios_dir / "breaker.yaml", {"retry.strategy": "fixed"})
    times = run(sc).attempt_times
    _, counts = np.unique(times, return_counts=True)
    herd = sc.downstream.overload.collapse.threshold + sc.breaker.minimum_calls
    assert counts.max() == herd
    assert (counts == herd).sum() >= 3


def crowded() -> dict:
    """600 jobs/s for 60 workers against 10 slots of 50 ms (200/s) and a room of 20:
    the queue backs up, the room stays full, retries every 100 ms, two of them."""
    return tiny(duration="20s", workload={"arrivals": "poisson", "rate": 600},
                workers={"count": 60},
                downstream={"concurrency": 10, "queue_limit": 20,
                            "service": {"distribution": "exponential", "mean": "50ms"}},
                retry={"strategy": "fixed", "base": "100ms", "max_retries": 2})


def test_a_freed_worker_takes_its_own_place_so_a_refused_job_is_refused_to_the_end():
    """A worker a success frees takes a waiting job and calls in that instant, into the
    place its call left; retries land between those instants and find the room full. So
    every refused job is refused on each of its 1 + max_retries calls: rejected calls are
    3 per dead-lettered job. Shared pro rata, they were 4.7."""
    sc, grid, f = flows_of(crowded())
    late = slice(grid.n // 2, None)
    assert f.queue_depth[grid.n // 2] > 1000  # the backlog that makes every call prompt
    assert f.rejected[late].sum() / f.failed_dlq[late].sum() == pytest.approx(3, rel=0.01)


@pytest.mark.slow
def test_in_the_simulation_a_refused_job_is_refused_to_the_end_too():
    from herdsim.results.result import run

    ts = run(load_scenario(crowded())).timeseries
    late = ts.time >= 10
    assert ts.rejected[late].sum() / ts.failed_dlq[late].sum() == pytest.approx(3, rel=0.01)

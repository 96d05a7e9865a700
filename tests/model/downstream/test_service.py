"""The continuous latency model (``downstream.overload.latency_model: continuous``).

Every call in service progresses at r = mean / (mean + latency_per_call × busy); a call
with work w (= draw × slow) finishes when the integral of r since its start reaches w.
The event logs below drive the downstream directly with scripted call times and constant
service, and compare every finish with the time worked out by hand from that rule.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from conftest import assert_every_job_ends_in_one_place, play_calls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from small_scenarios import scenarios

import herdsim
from herdsim.config.sections import Downstream as DownstreamConfig
from herdsim.model.downstream.core import DOWN, FAILED, OK, REJECTED, TIMEOUT, Downstream
from herdsim.model.recorder import Recorder
from herdsim.model.simulation import Simulation
from herdsim.model.streams import Draws, draws

# mean 1 s, latency_per_call 1 s: r(n) = 1 / (1 + n), so a lone call takes 2 s.
BASE = {"service": {"distribution": "constant", "mean": "1s"},
        "overload": {"latency_per_call": "1s", "latency_model": "continuous"}}


def constant(value: float) -> Draws:
    return draws(lambda n: np.full(n, value))


def play(starts: dict[str, float], until: float, **fields) -> tuple[dict, Recorder]:
    """Make one call per name at its time; return ``{name: (time heard, outcome)}``."""
    cfg = DownstreamConfig.model_validate({**BASE, **fields})
    env = simpy.Environment()
    recorder = Recorder()
    network = constant(cfg.network_delay.mean) if cfg.network_delay else None
    downstream = Downstream(env, cfg, constant(cfg.service.mean), constant(1.0), recorder,
                            network)
    return play_calls(env, downstream, starts, until, cfg.timeout), recorder


def rounded(values) -> list[float]:
    return [round(v, 9) for v in values]


def test_two_overlapping_calls_share_the_slowdown():
    """A alone on [0, 1) at rate 1/2 does 0.5 of its work; with B from t = 1 both run at
    1/3, so A's remaining 0.5 takes 1.5 s (A ends at 2.5, B has done 0.5); alone again at
    1/2, B's remaining 0.5 takes 1 s (B ends at 3.5). (at_start would give 2 and 4.)"""
    log, _ = play({"A": 0.0, "B": 1.0}, until=10)
    assert log == {"A": (2.5, OK), "B": (3.5, OK)}


def test_at_start_gives_the_fixed_times_for_the_same_calls():
    """The same calls under at_start: 1 + 1 × 1 = 2 s for A, 1 + 1 × 2 = 3 s for B."""
    log, _ = play({"A": 0.0, "B": 1.0}, until=10,
                  overload={"latency_per_call": "1s", "latency_model": "at_start"})
    assert log == {"A": (2.0, OK), "B": (4.0, OK)}


def test_calls_that_time_out_keep_loading_the_server_until_their_work_is_done():
    """Timeout 2.45 s: A's client leaves at 2.45 and B's at 3.45, before their finishes
    (2.5, 3.5: unchanged, the server works on); both are wasted work at 2.5 and 3.5."""
    log, rec = play({"A": 0.0, "B": 1.0}, until=10, timeout="2.45s")
    assert log == {"A": (2.45, TIMEOUT), "B": (3.45, TIMEOUT)}
    assert rounded(rec.wasted) == [2.5, 3.5]
    assert rounded(rec.timeouts) == [2.45, 3.45]


@pytest.mark.parametrize(("timeout", "heard", "wasted"), [
    (None, {"A": (2.7, OK), "B": (3.7, OK)}, []),
    ("2.75s", {"A": (2.7, OK), "B": (3.7, OK)}, []),
    ("2.65s", {"A": (2.65, TIMEOUT), "B": (3.65, TIMEOUT)}, [2.5, 3.5]),
])
def test_the_response_crosses_the_network_after_the_slot_frees(timeout, heard, wasted):
    """Network delay 0.2 s: the server finishes at 2.5 and 3.5 as above and the clients
    hear 0.2 s later; an answer that would arrive after the deadline is wasted work at
    the server's finish and the client times out at its deadline."""
    log, rec = play({"A": 0.0, "B": 1.0}, until=10, timeout=timeout,
                    network_delay={"distribution": "constant", "mean": "0.2s"})
    assert log == heard
    assert rounded(rec.wasted) == wasted


def test_a_waiting_call_starts_when_the_slot_frees():
    """One slot: A alone takes 2 s; B waits from 0.5 and then runs alone: 2 s to 4.
    A third call C at 1 finds the waiting room (size 1) full."""
    log, _ = play({"A": 0.0, "B": 0.5, "C": 1.0}, until=10, concurrency=1, queue_limit=1)
    assert log == {"A": (2.0, OK), "B": (4.0, OK), "C": (1.0, REJECTED)}


def test_a_down_outage_fails_every_call_in_service_and_empties_the_heap():
    """A and B fail at 2 (outage [2, 2.5)); C, made at 2.2, fails fast; D at 3 is alone:
    2 s, ending at 5 (a heap still holding A or B would slow it)."""
    log, _ = play({"A": 0.0, "B": 1.0, "C": 2.2, "D": 3.0}, until=10,
                  outages=[{"start": "2s", "duration": "0.5s"}])
    assert log == {"A": (2.0, FAILED), "B": (2.0, FAILED), "C": (2.2, DOWN), "D": (5.0, OK)}


def test_serve_abandoned_holds_the_slot_for_a_whole_service():
    """One slot, timeout 1 s: B waits from 0.5 and leaves at 1.5; A ends at 2, then B is
    served anyway, alone, 2 s of work nobody waits for (wasted at 4); C at 2.5 waits
    for that slot and runs 4 to 6, its deadline (3.5) long gone: wasted at 6."""
    log, rec = play({"A": 0.0, "B": 0.5, "C": 2.5}, until=10, concurrency=1,
                    timeout="1s", serve_abandoned=True)
    assert log == {"A": (1.0, TIMEOUT), "B": (1.5, TIMEOUT), "C": (3.5, TIMEOUT)}
    assert rounded(rec.wasted) == [2.0, 4.0, 6.0]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=scenarios(), latency=st.sampled_from([0.0, 0.001, 0.005, 0.02]))
@pytest.mark.slow
def test_continuous_conserves_jobs_and_slots(data, latency):
    """test_conservation's scenarios under the continuous model: after every event the
    busy count equals the heap's size, never negative nor above the concurrency, and
    every job ends in exactly one place."""
    data["downstream"]["overload"].update(latency_per_call=latency, latency_model="continuous")
    sc = herdsim.load_scenario(data)
    sim = Simulation(sc)
    env, ds = sim.env, sim.downstream
    while env.peek() < sc.duration:
        env.step()
        assert 0 <= ds.busy == len(ds.service.heap) <= sc.downstream.concurrency
        assert ds.n_waiting >= 0
    assert_every_job_ends_in_one_place(sim, sim.run())


def test_at_start_is_the_default(make_scenario):
    """Omitting latency_model and setting it to at_start run the same model, bit for bit."""
    def run(**overload):
        return herdsim.run(herdsim.load_scenario(make_scenario(
            duration="3s", workload={"rate": 150},
            downstream={"timeout": "60ms", "queue_limit": 10,
                        "network_delay": {"distribution": "exponential", "mean": "5ms"},
                        "overload": {"latency_per_call": "10ms", **overload}})))

    omitted, explicit = run(), run(latency_model="at_start")
    wall = {"wall_seconds", "calls_per_wall_second"}
    same = {k: v for k, v in omitted.summary.items() if k not in wall}
    assert same == {k: v for k, v in explicit.summary.items() if k not in wall}
    assert same["timeouts_total"] > 0 and same["jobs_succeeded"] > 0  # the knobs are in play
    assert omitted.jobs.equals(explicit.jobs)
    assert omitted.timeseries.equals(explicit.timeseries)

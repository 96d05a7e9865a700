"""Mechanisms the reproductions of the originals need, each off by default.

The event logs drive the downstream directly with scripted call times and constant
draws (as tests/test_latency_model.py does) and compare every time with the rule worked
out from the fields: send + request leg + service + response leg, and so on.
"""

from __future__ import annotations

import math

import numpy as np
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simpy import Interrupt
from test_conservation import scenarios

import herdsim
from herdsim.config.scenario import Downstream as DownstreamConfig
from herdsim.model.downstream import DOWN, OK, REJECTED, TIMEOUT, Downstream
from herdsim.model.kernel import Environment
from herdsim.model.recorder import Recorder
from herdsim.model.simulation import Simulation
from herdsim.model.streams import Draws
from herdsim.results.result import Result

SERVICE, REQUEST, RESPONSE = 1.0, 0.3, 0.2
LEGS = {"service": {"distribution": "constant", "mean": SERVICE},
        "request_delay": {"distribution": "constant", "mean": REQUEST},
        "network_delay": {"distribution": "constant", "mean": RESPONSE}}


def constant(value: float) -> Draws:
    return Draws(lambda n: np.full(n, value))


def play(starts: dict[str, float], until: float = 20.0, **fields):
    """Make one call per name at its send time; ``{name: (time heard, outcome)}``."""
    cfg = DownstreamConfig.model_validate({**LEGS, **fields})
    env = Environment()
    recorder = Recorder()
    legs = [constant(leg.mean) if leg else None for leg in (cfg.network_delay,
                                                            cfg.request_delay)]
    downstream = Downstream(env, cfg, constant(cfg.service.mean), constant(1.0), recorder,
                            *legs)
    log: dict[str, tuple[float, int]] = {}

    def caller(name: str, at: float):
        yield env.timeout(at)
        call = downstream.call(env.active_process)
        if call.__class__ is int:
            log[name] = (env.now, call)
            return
        try:
            outcome = downstream.finish(call, (yield call.event))
        except Interrupt as failure:
            outcome = failure.cause
        log[name] = (round(env.now, 9), outcome)

    for name, at in starts.items():
        env.process(caller(name, at))
    env.run(until=until)
    return log, recorder, downstream


def rounded(values) -> list[float]:
    return [round(v, 9) for v in values]


# -- a. the request leg -------------------------------------------------------------------

def test_a_call_crosses_both_legs():
    """Heard at send + request + service + response; the server sees it (attempts) and
    holds the slot from send + request for one service."""
    log, rec, _ = play({"A": 0.0})
    assert log == {"A": (round(REQUEST + SERVICE + RESPONSE, 9), OK)}
    assert rounded(rec.attempts) == [REQUEST]


def test_admission_and_outages_are_decided_at_arrival():
    """Outage [0.1, 0.5): A, sent at 0, is on the wire at 0.1 (not failed in flight) and
    arrives at 0.3: DOWN, heard a response leg later. B, sent at 0.25, arrives at 0.55,
    after the outage: served."""
    log, rec, _ = play({"A": 0.0, "B": 0.25}, outages=[{"start": 0.1, "duration": 0.4}])
    assert log == {"A": (round(REQUEST + RESPONSE, 9), DOWN),
                   "B": (round(0.25 + REQUEST + SERVICE + RESPONSE, 9), OK)}
    assert rounded(rec.rejected) == [REQUEST]


def test_concurrency_is_counted_at_arrival():
    """One slot, a waiting room of 1: A holds the slot [0.3, 1.3); B (sent 0.1) waits
    from 0.4 and starts at 1.3; C (sent 0.2, arriving 0.5) finds the room full: REJECTED,
    heard at 0.5 + response."""
    log, _, _ = play({"A": 0.0, "B": 0.1, "C": 0.2}, concurrency=1, queue_limit=1)
    a_done = REQUEST + SERVICE
    assert log == {"A": (round(a_done + RESPONSE, 9), OK),
                   "B": (round(a_done + SERVICE + RESPONSE, 9), OK),
                   "C": (round(0.2 + REQUEST + RESPONSE, 9), REJECTED)}


def test_the_timeout_counts_both_legs_from_the_send():
    """Timeout just below the round trip: the client gives up at send + timeout, the
    server finishes anyway (wasted at send + request + service)."""
    timeout = REQUEST + SERVICE + RESPONSE - 0.05
    log, rec, ds = play({"A": 0.0}, timeout=timeout)
    assert log == {"A": (round(timeout, 9), TIMEOUT)}
    assert rounded(rec.wasted) == [round(REQUEST + SERVICE, 9)]
    assert ds.busy == 0 and not ds.active


def test_a_request_slower_than_the_timeout_still_loads_the_server():
    """Timeout 0.2 < request leg 0.3: the client times out at 0.2; the call reaches the
    server at 0.3 (an attempt) and is served for nobody (wasted at 1.3)."""
    log, rec, ds = play({"A": 0.0}, timeout=0.2)
    assert log == {"A": (0.2, TIMEOUT)}
    assert rounded(rec.attempts) == [REQUEST]
    assert rounded(rec.wasted) == [round(REQUEST + SERVICE, 9)]
    assert ds.busy == 0 and not ds.active


def test_a_fast_failure_arriving_after_the_deadline_is_a_timeout():
    """No waiting room, one slot: B (sent 0.1) is rejected at 0.4; its answer would
    arrive at 0.6, after its deadline (0.1 + 0.45): the client times out at 0.55."""
    log, _, _ = play({"A": 0.0, "B": 0.1}, concurrency=1, queue_limit=0, timeout=1.55)
    assert log["B"] == (round(0.1 + REQUEST + RESPONSE, 9), REJECTED)
    log, _, _ = play({"A": 0.0, "B": 0.1}, concurrency=1, queue_limit=0, timeout=0.45)
    assert log["B"] == (round(0.1 + 0.45, 9), TIMEOUT)


def test_a_waiting_call_abandoned_at_its_deadline_leaves_the_count():
    """One slot, timeout 0.35: A holds the slot [0.3, 1.3); B, sent at 0.05, arrives at
    0.35 and waits; its client leaves at 0.4; at 1.3 B is dropped (serve_abandoned off)."""
    log, _, ds = play({"A": 0.0, "B": 0.05}, concurrency=1, timeout=0.35)
    assert log["B"] == (0.4, TIMEOUT)
    assert ds.n_waiting == 0 and ds.busy == 0


def test_requests_abandoned_on_the_wire_load_the_server_uncounted():
    """Timeout 0.2 < request leg: both clients leave while their calls are on the wire.
    A takes the one slot at 0.3; B, arriving at 0.35, waits but is not counted as
    waiting; with serve_abandoned both are served for nobody, back to back."""
    _, _, ds = play({"A": 0.0, "B": 0.05}, until=0.5, concurrency=1, timeout=0.2,
                    serve_abandoned=True)
    assert (ds.busy, ds.n_waiting, ds.active) == (1, 0, {})
    _, rec, _ = play({"A": 0.0, "B": 0.05}, concurrency=1, timeout=0.2,
                     serve_abandoned=True)
    assert rounded(rec.wasted) == [REQUEST + SERVICE, REQUEST + 2 * SERVICE]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=scenarios(), request=st.floats(0.001, 0.3),
       model=st.sampled_from(["at_start", "continuous"]))
def test_with_a_request_leg_every_job_ends_in_one_place(data, request, model):
    """test_conservation's scenarios with a request leg, under both latency models:
    slots and the waiting room never go negative nor past their limits, and every job
    is counted once."""
    data["downstream"]["request_delay"] = {"distribution": "exponential", "mean": request}
    data["downstream"]["overload"]["latency_model"] = model
    sc = herdsim.load_scenario(data)
    sim = Simulation(sc)
    env, ds = sim.env, sim.downstream
    while env.peek() < sc.duration:
        env.step()
        assert 0 <= ds.busy <= sc.downstream.concurrency
        assert ds.n_waiting <= (sc.downstream.queue_limit or math.inf)
        assert ds.n_waiting >= 0
    s = Result.from_finished(sim.run()).summary
    assert s["jobs_submitted"] == s["jobs_succeeded"] + s["jobs_dead_lettered"] + s["jobs_pending"]
    assert len(set(sim.recorder.finish_id)) == len(sim.recorder.finish_id), "finished twice"


def test_the_kernel_environment_keeps_simpy_time():
    """kernel.Environment's ``now`` is SimPy's own clock."""
    env = Environment()

    def wait():
        yield env.timeout(2.5)

    env.process(wait())
    env.run()
    assert env.now == simpy.Environment.now.fget(env) == 2.5

"""The connection-herd model (herdsim/model/downstream/broker.py): its rules pinned where
they are deterministic, against an independent SimPy model of the same rules, invariants
over random runs (Hypothesis), and the first reconnect's distribution (KS).

Budget: about 5 s on one core.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.model.downstream import broker
from herdsim.model.recorder import Recorder
from herdsim.results.result import run


def broker_scenario(clients: int = 50, strategy: str = "fixed", *, base: str = "1s",
                    cap: str = "10s", slots: int = 2, service: float = 0.05,
                    limit: int | None = None, timeout: str | None = None,
                    outages: list | None = None, collapse: dict | None = None,
                    duration: str = "20s", seed: int = 0, max_retries: int | None = None,
                    room: int | None = None, keepalive: str = "0s"):
    downstream = {"model": "broker", "concurrency": slots, "queue_limit": room,
                  "service": {"distribution": "constant", "mean": service},
                  "timeout": timeout,
                  "outages": [{"mode": "down", "start": "2s", "duration": "1s"}]
                  if outages is None else outages,
                  "broker": {"max_connections": limit, "keepalive": keepalive}}
    if collapse is not None:
        downstream["overload"] = {"collapse": collapse}
    return load_scenario({
        "name": "broker", "seed": seed, "duration": duration, "bin": "100ms",
        "workload": {"rate": 1}, "workers": {"count": clients},
        "downstream": downstream,
        "retry": {"strategy": strategy, "base": base, "cap": cap, "max_retries": max_retries},
    })


def herd(scenario):
    recorder = Recorder()
    state, pending = broker.reconnect(scenario, recorder)
    return state, pending, recorder


def test_a_down_outage_drops_every_connection_at_its_start():
    """Clients start connected; a down outage at 2 s drops all of them at 2 s (one
    disconnection each, a job arriving at 2 s) and the connected gauge reads 0 after."""
    result = run(broker_scenario(40))
    ts = result.timeseries
    assert ts["connected"].iloc[0] == 40
    assert ts["disconnects"].sum() == 40
    assert (result.jobs["arrival"] == 2.0).all()
    assert ts.loc[ts["time"] == 2.1, "connected"].item() == 0


def test_fixed_reconnects_coincide():
    """Fixed backoff and no jitter: every client's first reconnect lands at the same
    instant, drop + base (a delta); refused ones come back together base later."""
    result = run(broker_scenario(30, "fixed", base="1s", limit=10))
    first = result.sleeps[result.sleeps["attempt"] == 0]
    assert len(first) == 30 and (first["sleep"] == 1.0).all()
    assert np.unique(first["time"] + first["sleep"]).tolist() == [3.0]
    per_bin = result.timeseries.set_index("time")["connects"]
    assert per_bin[3.0] == 30  # all at once; 10 taken (the limit), 20 refused
    assert result.timeseries["connects_refused"].sum() >= 20


def test_full_jitter_spreads_the_first_reconnect_uniformly():
    """Full jitter's first sleep is U[0, base): the first reconnects of 2,000 clients
    after one drop spread uniformly over [drop, drop + base) (KS, fixed seed)."""
    base = 2.0
    result = run(broker_scenario(2000, "full_jitter", base="2s", slots=64, service=0.001,
                                 seed=3))
    first = result.sleeps[result.sleeps["attempt"] == 0]
    assert len(first) == 2000
    offsets = (first["time"] + first["sleep"] - 2.0).to_numpy()
    assert offsets.min() >= 0 and offsets.max() < base
    assert stats.kstest(offsets, stats.uniform(0, base).cdf).pvalue > 0.01


def reference(clients: int, slots: int, service: float, base: float, limit: int | None,
              drop: float, down: float, until: float) -> tuple[list[float], int]:
    """The same rules written independently, one SimPy process per client: a down outage
    [drop, drop + down) drops everyone; each client sleeps ``base`` (fixed backoff), then
    connects: refused while down or at ``limit`` open connections, else served FIFO by
    ``slots`` for ``service``. The accept times and the refusals."""
    env = simpy.Environment()
    slot = simpy.Resource(env, capacity=slots)
    accepted: list[float] = []
    counts = {"open": 0, "refused": 0}

    def client():
        yield env.timeout(drop)
        while True:
            yield env.timeout(base)
            if env.now < drop + down or (limit is not None and counts["open"] >= limit):
                counts["refused"] += 1
                continue
            counts["open"] += 1
            with slot.request() as req:
                yield req
                yield env.timeout(service)
            accepted.append(env.now)
            return

    for _ in range(clients):
        env.process(client())
    env.run(until=until)
    return accepted, counts["refused"]


@pytest.mark.parametrize("clients,slots,limit", [(1, 1, None), (25, 3, None), (40, 4, 15),
                                                 (200, 7, 60)])
def test_the_engine_agrees_with_a_process_per_client(clients, slots, limit):
    """The event heap over flat arrays (the million-client path) and a SimPy process per
    client, on a small population: the same accept times and refusals (a limit below the
    clients leaves the rest refused for ever)."""
    service, base = 0.05, 1.5
    result = run(broker_scenario(clients, "fixed", base="1500ms", slots=slots,
                                 service=service, limit=limit,
                                 outages=[{"mode": "down", "start": "2s", "duration": "2s"}],
                                 duration="30s"))
    accepted, refused = reference(clients, slots, service, base, limit, 2.0, 2.0, 30.0)
    _, _, recorder = herd(broker_scenario(clients, "fixed", base="1500ms", slots=slots,
                                          service=service, limit=limit,
                                          outages=[{"mode": "down", "start": "2s",
                                                    "duration": "2s"}], duration="30s"))
    assert np.allclose(sorted(recorder.counter("connects_accepted")), sorted(accepted))
    assert len(recorder.rejected) == refused
    if len(accepted) == clients:  # every client back: when the last one was
        assert result.summary["reconnect_time"] == pytest.approx(max(accepted) - 2.0)
    else:  # a limit below the clients: some never are
        assert result.summary["reconnect_time"] is None


def test_a_herd_that_crashes_the_broker_keeps_it_down_and_jitter_does_not():
    """The bundled story: with fixed reconnects every wave is the whole population, more
    than the crash threshold, so the broker crashes at every wave and no client is ever
    back; full jitter's waves stay under it and every client reconnects."""
    sc = load_scenario("scenarios/reconnect.yaml")
    fixed = run(sc)
    jitter = run(load_scenario("scenarios/reconnect.yaml", {"retry.strategy": "full_jitter"}))
    assert fixed.summary["reconnect_time"] is None and fixed.summary["collapses"] >= 5
    assert fixed.timeseries["connected"].iloc[-1] == 0
    assert jitter.summary["collapses"] == 0
    assert jitter.summary["reconnect_time"] is not None
    assert jitter.timeseries["connected"].iloc[-1] == 3000


def test_scaling_the_population_and_the_broker_together_keeps_the_story():
    """Clients, slots, connection limit and crash threshold all × 10, constant service
    and fixed backoff: the fraction connected is the same, bin for bin (what lets the
    million-client benchmark tell the bundled story)."""
    outages = [{"mode": "down", "start": "2s", "duration": "1s"}]
    small = run(broker_scenario(100, slots=2, limit=60, outages=outages,
                                collapse={"window": "100ms", "threshold": 40,
                                          "restart_time": "2s"}))
    large = run(broker_scenario(1000, slots=20, limit=600, outages=outages,
                                collapse={"window": "100ms", "threshold": 400,
                                          "restart_time": "2s"}))
    assert np.array_equal(small.timeseries["connected"] / 100,
                          large.timeseries["connected"] / 1000)


case = st.fixed_dictionaries({
    "clients": st.integers(1, 120), "slots": st.integers(1, 6),
    "service": st.sampled_from([0.01, 0.05, 0.2]),
    "limit": st.none() | st.integers(1, 150), "room": st.none() | st.integers(0, 30),
    "timeout": st.none() | st.sampled_from(["100ms", "1s"]),
    "strategy": st.sampled_from(["fixed", "exponential", "full_jitter", "equal_jitter",
                                 "decorrelated_jitter"]),
    "max_retries": st.none() | st.integers(0, 6),
    "mode": st.sampled_from(["down", "blackhole", "error", "slow"]),
    "threshold": st.none() | st.integers(1, 80), "seed": st.integers(0, 2**16),
})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case)
def test_invariants_over_random_herds(c):
    """Every client ends connected, backing off, connecting or gone (the clients are
    conserved); every disconnection is a job that succeeded, gave up or is pending; every
    connect is accepted, refused, timed out, failed or still open; the connections open
    (established + in handshake) never exceed max_connections once the first drop
    emptied the broker."""
    outage = {"mode": c["mode"], "start": "1s", "duration": "1s"}
    if c["mode"] == "error":
        outage["error_rate"] = 0.5
    if c["mode"] == "slow":
        outage["factor"] = 5
    timeout = c["timeout"] or ("1s" if c["mode"] == "blackhole" else None)
    collapse = ({"window": "100ms", "threshold": c["threshold"], "restart_time": "1s"}
                if c["threshold"] else None)
    sc = broker_scenario(c["clients"], c["strategy"], base="200ms", cap="2s",
                         slots=c["slots"], service=c["service"], limit=c["limit"],
                         timeout=timeout, outages=[outage], collapse=collapse,
                         duration="8s", seed=c["seed"], max_retries=c["max_retries"],
                         room=c["room"])
    state, pending, rec = herd(sc)
    n = c["clients"]
    codes = np.frombuffer(state.state, dtype=np.uint8)
    counts = np.bincount(codes, minlength=4)
    assert counts.sum() == n
    outcomes = np.bincount(np.asarray(rec.finish_outcome, dtype=np.int64), minlength=2)
    assert len(rec.arrivals) == outcomes.sum() + len(pending)
    assert len(pending) == counts[broker.BACKING_OFF] + counts[broker.CONNECTING]
    assert outcomes[1] == counts[broker.GONE]
    accepted = rec.counter("connects_accepted")
    assert n - len(rec.arrivals) + len(accepted) == counts[broker.CONNECTED]
    open_end = sum(1 for x in range(n) if codes[x] == broker.CONNECTING)
    assert len(rec.attempts) == (len(accepted) + len(rec.rejected) + len(rec.timeouts)
                                 + len(rec.errors) + open_end)
    if c["limit"] is not None and rec.arrivals:
        first = min(rec.arrivals)
        events = sorted([(t, -1) for t in rec.arrivals] + [(t, 1) for t in accepted])
        connected = n
        for t, step in events:
            connected += step
            if t >= first and step > 0:
                assert connected <= c["limit"]


def test_the_broker_fields_belong_to_the_broker_model():
    """``broker`` with another model is refused naming the model that has it."""
    with pytest.raises(ScenarioError, match="only a broker downstream has broker"):
        load_scenario({"name": "x", "duration": "1s", "workload": {"rate": 1},
                       "downstream": {"broker": {"max_connections": 5}}})
    with pytest.raises(ScenarioError, match="max_connections"):
        broker_scenario(limit=0)


def test_a_blackhole_drops_the_connections_when_the_clients_notice_and_its_connects_hang():
    """A blackhole at 2 s with keepalive 500 ms: the connections drop at 2.5 s, not
    before; a connect made while it holds is never answered, its client times out after
    its timeout (300 ms), and none is refused or accepted until the blackhole ends."""
    result = run(broker_scenario(20, "fixed", base="100ms", timeout="300ms",
                                 keepalive="500ms",
                                 outages=[{"mode": "blackhole", "start": "2s",
                                           "duration": "1s"}]))
    ts = result.timeseries
    assert (result.jobs["arrival"] == 2.5).all() and len(result.jobs) == 20
    assert ts.loc[ts["time"] < 2.45, "connected"].eq(20).all()
    during = ts[(ts["time"] > 2.45) & (ts["time"] < 2.95)]  # the bins of [2.5 s, 3 s)
    assert during["connects_accepted"].sum() == 0 and during["connects_refused"].sum() == 0
    assert during["connects"].sum() == 20  # all at 2.6 s (fixed 100 ms)
    assert during["timeouts"].sum() == 20  # together at 2.9 s
    assert result.sleeps.loc[result.sleeps["attempt"] == 1, "time"].round(9).eq(2.9).all()
    assert ts["connected"].iloc[-1] == 20  # back after it ends


@pytest.mark.parametrize("field, value", [("rate_limit", {"rate": 5}),
                                          ("discipline", "lifo"),
                                          ("network_delay", {"mean": 0.01}),
                                          ("admission", {"kind": "fixed", "limit": 5})])
def test_a_queue_field_the_broker_does_not_read_is_refused_naming_the_model(field, value):
    """The broker declares the downstream fields it reads; any other set is an error at
    that field naming the model, never a setting silently ignored."""
    doc = {"name": "x", "duration": "5s", "workload": {"rate": 1},
           "workers": {"count": 5}, "downstream": {"model": "broker", field: value}}
    with pytest.raises(ScenarioError) as err:
        load_scenario(doc)
    (path, message), = err.value.problems
    assert path == f"downstream.{field}" and "broker model does not read" in message


@pytest.mark.parametrize(("mode", "drops"), [("down", True), ("blackhole", True),
                                             ("error", False), ("slow", False)])
def test_the_state_tells_whether_anything_dropped(mode, drops):
    """broker x each outage mode: down and blackhole (once keepalive, 0.5 s of its 1 s,
    tells) drop every connection, a job each, and the bundled herd under fixed 2 s
    reconnects never gets them all back, crashing the broker at every wave after the
    outage (metastable: the classifier's rule, analysis/summary.py ``stuck``); error and
    slow outages fail or slow
    handshakes only, so with every client connected nothing drops: no job, and nothing
    to recover from is not "degraded" (it read so)."""
    overrides = {"downstream.outages.0.mode": mode, "downstream.broker.keepalive": "500ms"}
    if mode == "slow":
        overrides["downstream.outages.0.factor"] = "5"
    s = run(load_scenario("scenarios/reconnect.yaml", overrides)).summary
    assert (s["jobs_submitted"] == 3000) is drops
    assert s["state"] == ("metastable" if drops else "recovered")
    assert (s["collapses_after_outage"] > 0) is drops

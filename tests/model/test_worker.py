"""The engine's fast paths against its own general path, number for number.

When nothing gates a worker's or caller's call (:func:`herdsim.model.worker.plain`), the
run uses ``plain_worker`` on a lean :class:`~herdsim.model.kernel.Runner` for queue
workers and ``plain_caller`` (callbacks, no process) for open-loop callers; otherwise
every worker or caller is a ``simpy.Process`` running ``worker`` + ``run_job`` or
``run_job``, the loop every feature goes through. Both take the same steps in the same
order and schedule the same events, so forcing the general path on a plain scenario
must change no number at all: the frames are compared exactly. (The plain loop's idle
workers also take jobs last idle first, the general loop's longest idle first: the same
frames show that which of them takes a job changes nothing.) The scenarios are the
bundled plain ones, shortened where their story allows, plus small ones that exercise
what the bundled ones do not (bursts on a backlog with a full main queue, no DLQ, a
waiting room under client deadlines, a network delay; open-loop callers through a
burst, poison jobs, a waiting room, a network delay and outages of every mode, and
constant times that tie). Budget: about 15 s.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import SCENARIOS, tiny

import herdsim
from herdsim.model import simulation
from herdsim.model.worker import GATES, plain

BUNDLED = {"outage.yaml": {"duration": "30s"}, "metastable.yaml": {"duration": "25s"},
           "brownout.yaml": {}, "poison.yaml": {"duration": "60s"},
           "open_loop.yaml": {"duration": "30s"}, "collapse.yaml": {"duration": "30s"},
           "retries.yaml": {"duration": "30s"}}
SMALL = {
    "bursts-full-queue": tiny(
        duration="6s", workload={"arrivals": "burst", "rate": 400, "burst_size": 20,
                                 "backlog": 300, "queue_limit": 150},
        downstream={"outages": [{"start": "2s", "duration": "1s", "mode": "down"}]}),
    "no-dlq-deadlines": tiny(
        duration="6s", workload={"rate": 300},
        workers={"count": 30, "retry_mode": "sleep"},
        downstream={"concurrency": 4, "queue_limit": 20, "timeout": "60ms",
                    "outages": [{"start": "2s", "duration": "1s", "mode": "down"}]},
        retry={"strategy": "full_jitter", "max_retries": 2},
        dlq={"enabled": False, "redelivery_delay": "200ms"}),
    "network-constant": tiny(
        duration="5s", workload={"arrivals": "constant", "rate": 200},
        downstream={"concurrency": 3, "timeout": "100ms",
                    "service": {"distribution": "constant", "mean": "10ms"},
                    "network_delay": {"distribution": "exponential", "mean": "5ms"}},
        retry={"strategy": "fixed", "base": "20ms"}),
    "open-loop-everything": tiny(
        duration="6s", workload={"arrivals": "burst", "rate": 600, "burst_size": 15,
                                 "backlog": 200, "poison_fraction": 0.05},
        workers={"count": None},
        downstream={"concurrency": 8, "queue_limit": 30, "timeout": "80ms",
                    "service": {"distribution": "lognormal", "mean": "12ms"},
                    "network_delay": {"distribution": "exponential", "mean": "3ms"},
                    "outages": [{"start": "2s", "duration": "1s", "mode": "down"},
                                {"start": "3.5s", "duration": "500ms", "mode": "error",
                                 "error_rate": 0.3},
                                {"start": "4.5s", "duration": "500ms", "mode": "blackhole"}]},
        retry={"strategy": "full_jitter", "base": "30ms", "max_retries": 4}),
    "open-loop-constant-ties": tiny(
        duration="4s", workload={"arrivals": "constant", "rate": 200},
        workers={"count": None},
        downstream={"concurrency": 1, "service": {"distribution": "constant", "mean": "5ms"},
                    "outages": [{"start": "1s", "duration": "250ms", "mode": "down"}]},
        retry={"strategy": "fixed", "base": "10ms", "max_retries": 30}),
}


def frames(scenario: herdsim.Scenario) -> dict[str, pd.DataFrame]:
    res = herdsim.run(scenario)
    return {"timeseries": res.timeseries, "sleeps": res.sleeps, "jobs": res.jobs}


CASES = [pytest.param(SCENARIOS / name, overrides, id=name,
                      marks=[pytest.mark.slow] * (name == "outage.yaml"))  # 3,000 workers
         for name, overrides in BUNDLED.items()]
CASES += [pytest.param(spec, {}, id=name) for name, spec in SMALL.items()]


@pytest.mark.slow
@pytest.mark.parametrize(("source", "overrides"), CASES)
def test_the_fast_path_gives_the_general_paths_numbers(source, overrides, monkeypatch):
    scenario = herdsim.load_scenario(source, overrides)
    assert plain(scenario)  # else this compares the general path with itself
    fast = frames(scenario)
    monkeypatch.setattr(simulation, "plain", lambda _scenario: False)
    general = frames(scenario)
    for name, frame in fast.items():
        pd.testing.assert_frame_equal(frame, general[name], check_exact=True, obj=name)


# A value turning on each feature the schema marks as gating a worker's call.
TURNED_ON = {
    "workers.retry_mode": "requeue",
    "workers.attempt_overhead": "1ms",
    "retry.retry_after": "use",
    "retry.throttling_base": "50ms",
    "breaker": {"enabled": True},
    "budget": {"kind": "ratio"},
    "workers.autoscale": {"metric": "queue_depth", "target": 5, "max": 16, "interval": "250ms"},
    "client_limiter": {"scope": "pool"},
    "retry.bucket": {"rate": 10, "burst": 100},
    "workload.keys": 50,
    "hedging": {"delay": "30ms"},
    "retry.late_answers": True,
    "workload.criticality": {"critical": 1, "sheddable": 1},
}
NEEDS = {"retry.late_answers": {"downstream.timeout": "50ms"}}  # what one needs beside it


def test_every_gating_field_is_exercised_below():
    """A field newly marked GatesCalls needs a value that turns it on here."""
    assert sorted(GATES) == sorted(TURNED_ON)


def _set(spec: dict, path: str, value) -> dict:
    *sections, key = path.split(".")
    node = spec
    for section in sections:
        node = node.setdefault(section, {})
    node[key] = value
    return spec


# What the open-loop callers need beside each feature, and the features they cannot have.
FOR_CALLERS = {"breaker": {"breaker.scope": "pool"}}
QUEUE_ONLY = {"workers.retry_mode", "workers.autoscale", "workload.keys",
              "workload.criticality"}
GATED = [pytest.param(path, False, id=f"{path}-workers") for path in sorted(TURNED_ON)]
GATED += [pytest.param(path, True, id=f"{path}-callers") for path in sorted(TURNED_ON)
          if path not in QUEUE_ONLY]


@pytest.mark.parametrize(("path", "open_loop"), GATED)
def test_a_feature_that_gates_calls_forces_the_general_loop(path, open_loop, monkeypatch):
    """Setting any field that gates a call takes every worker through ``worker`` +
    ``run_job`` and every open-loop caller through ``run_job`` (no fast path starts), and
    leaving it off keeps the fast path."""
    spec = tiny(duration="1s", workers={"count": None} if open_loop else {})
    if path == "hedging":  # the workers hedge or retry, not both
        del spec["retry"]
    assert plain(herdsim.load_scenario(spec))
    _set(spec, path, TURNED_ON[path])
    for extra, value in NEEDS.get(path, {}).items():
        _set(spec, extra, value)
    for extra, value in FOR_CALLERS.get(path, {}).items() if open_loop else ():
        _set(spec, extra, value)
    scenario = herdsim.load_scenario(spec)
    assert not plain(scenario)

    def fast_path(_sim):
        raise AssertionError(f"{path} set, yet the fast path started")

    monkeypatch.setattr(simulation, "make_plain_worker", fast_path)
    monkeypatch.setattr(simulation, "make_plain_caller", fast_path)
    res = herdsim.run(scenario)
    assert len(res.jobs) > 0


def test_a_member_that_declares_it_leaves_the_fast_path_is_heard(monkeypatch):
    """The choice of the loop asks the members a scenario holds, not only the fields
    marked ``GatesCalls``: a member declaring ``fast_path = False`` (here the service
    distribution, made to say so) takes the workers to the general loop, and a breaker
    keeps the fast path exactly when it is not enabled."""
    from herdsim.policies.distributions import Exponential

    sc = herdsim.load_scenario(tiny())
    assert plain(sc)
    monkeypatch.setattr(Exponential, "fast_path", False)
    assert not plain(sc)
    monkeypatch.undo()
    assert sc.breaker.keeps_fast_path() and plain(sc)
    enabled = herdsim.load_scenario(tiny(), {"breaker.enabled": True})
    assert not enabled.breaker.keeps_fast_path() and not plain(enabled)

"""The circuit breaker's fluid gate against its declared form: open once the failure
share reaches the threshold over the window, calls held for open_duration (times the
multiplier per consecutive trip), half-open while its probes are out, closed when they are
back; failing calls trip it once it has heard enough of them."""

from __future__ import annotations

import math

import pytest

from herdsim.policies.breaker import Resilience4j

DT = 0.01


def gate(**changes):
    cfg = Resilience4j(**{"enabled": True, "scope": "pool", "failure_rate_threshold": 0.4,
                          "window": 1.0, "minimum_calls": 20, "open_duration": 2.0,
                          "open_duration_multiplier": 2.0, **changes})
    return cfg.fluid_gate(DT, 300)


def test_it_opens_at_the_threshold_only_past_the_minimum_calls():
    g = gate()
    for i in range(100):  # 1 call a step, 30% failing: under the threshold
        assert not g.blocked(i, True)
        g.heard(i, 1.0, 0.3)
    assert g.trips == 0
    g.heard(100, 1.0, 20.0)  # the window's share jumps over 40% (49.7 of 100)
    assert g.trips == 1 and g.blocked(101, True)


def test_it_holds_for_open_duration_then_closes_or_reopens_longer():
    g = gate()
    g.heard(0, 100.0, 100.0)
    opened = [i for i in range(1, 1000) if g.blocked(i, False)]
    # unhealthy at every probe: 2 s, then 4 s, then 8 s open, a step of probe between
    assert opened[0] == 1 and g.trips >= 3
    g2 = gate()
    g2.heard(0, 100.0, 100.0)
    assert all(g2.blocked(i, True) for i in range(1, 200))
    assert not g2.blocked(200, True)  # 2 s later a probe would succeed: closed
    assert g2.trips == 1


def test_a_worker_scoped_breaker_needs_its_minimum_per_worker():
    """300 workers' breakers each hear 1/300 of the calls: the pool must make 300 x the
    minimum before any of them can open."""
    g = gate(scope="worker")
    g.heard(0, 20.0 * 299, 20.0 * 299)
    assert g.trips == 0
    g.heard(1, 20.0, 20.0)
    assert g.trips == 1


def test_half_open_sends_its_probes_and_waits_for_the_slowest():
    """Half-open at open_duration: half_open_calls probes go out and the rest wait for
    the slowest probe, the expected longest of 3 exponential services of 200 ms:
    200 ms x (1 + 1/2 + 1/3) = 367 ms (plus the room's wait), then it closes."""
    cfg = Resilience4j(enabled=True, scope="pool", window=1.0, minimum_calls=20,
                       open_duration=2.0, half_open_calls=3)
    g = cfg.fluid_gate(DT, 300, 0.2)
    g.heard(0, 100.0, 100.0)
    assert all(g.blocked(i, True) for i in range(1, 200))
    assert g.blocked(200, True, wait=0.1) and g.probing == 3
    wait = round((0.1 + 0.2 * (1 + 1 / 2 + 1 / 3)) / DT)  # 47 steps
    assert all(g.blocked(i, True) and g.probing == 0 for i in range(201, 200 + wait))
    assert not g.blocked(200 + wait, True)
    assert g.trips == 1


def test_a_probe_that_meets_a_failing_downstream_reopens_it():
    cfg = Resilience4j(enabled=True, scope="pool", window=1.0, open_duration=2.0)
    g = cfg.fluid_gate(DT, 300, 0.2)
    g.heard(0, 100.0, 100.0)
    assert g.blocked(200, True) and g.probing == 3
    assert g.blocked(210, False)  # down while the probes are out: open again, 2 s more
    assert g.trips == 2 and g.blocked(409, True) and g.probing == 0


@pytest.mark.parametrize(("calls", "failures", "threshold", "need"), [
    (0.0, 0.0, 0.4, 20.0),  # just closed: minimum_calls failures
    (100.0, 30.0, 0.4, (40.0 - 30.0) / 0.6),  # the share reaches 40% after 16.7 more
    (19.0, 19.0, 0.4, 1.0),  # one short of the minimum, all failed: the next trips it
    (100.0, 90.0, 1.0, math.inf),  # 100% needed and 10 calls succeeded: never
])
def test_failing_calls_trip_a_closed_breaker_once_it_has_heard_enough(calls, failures,
                                                                       threshold, need):
    g = gate(failure_rate_threshold=threshold, window=10.0)
    g.heard(0, calls, failures)
    assert g.trips == 0
    assert g.trips_after() == pytest.approx(need)
    heard = need * (1 + 1e-9) if need < math.inf else 1e6  # that many, every one failing
    g.heard(1, heard, heard)
    assert g.trips == (1 if need < math.inf else 0)

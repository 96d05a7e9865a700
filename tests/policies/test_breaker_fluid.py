"""The circuit breaker's fluid gate against its declared form: open once the failure
share reaches the threshold over the window, calls held for open_duration (times the
multiplier per consecutive trip), closed when a probe would succeed."""

from __future__ import annotations

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

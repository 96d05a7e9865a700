"""Outlier detection and active health checks: Envoy's own outlier detector tests
(``test/common/upstream/outlier_detection_impl_test.cc``) ported where they exercise
what herdsim models, and the rules' invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herdsim.policies.balancers.outlier import Active, Envoy


def load(ejector, host, n, failed, now=0.0):
    """``loadRq(host, n, code)``: *n* answers, 5xx when *failed*; whether any ejected."""
    return any([ejector.heard(host, failed, now) for _ in range(n)])


def test_envoy_basic_flow_5xx_via_http_codes():
    """BasicFlow5xxViaHttpCodes: max_ejection_percent 100, two hosts; 500, 200, then
    4 × 500 does not eject, the fifth does; a sweep at 9.999 s keeps it out, one at
    30.001 s brings it back; 5 more failures at 40 s eject it again (2 ejections)."""
    e = Envoy(max_ejection_percent=100, success_rate=False).ejector(2)
    load(e, 0, 1, True)
    load(e, 0, 1, False)
    assert not load(e, 0, 4, True)
    assert load(e, 0, 1, True, now=0.0)
    assert e.ejected[0] and e.active == 1
    assert e.tick(9.999) == [] and e.ejected[0]
    assert e.tick(30.001) == [0] and not e.ejected[0]
    assert not load(e, 0, 4, True, now=40.0)
    assert load(e, 0, 1, True, now=40.0)
    assert e.active == 1 and e.ejections == 2


def test_envoy_ejection_time_grows_with_each_ejection_and_is_capped():
    """ejectHost and onIntervalTimer: the backoff grows by one an ejection while
    backoff × base < max + base, the ejection lasts min(base × backoff, max), and a
    sweep a whole interval after the host came back lowers the backoff by one."""
    e = Envoy(max_ejection_percent=100, consecutive_5xx=1, success_rate=False,
              interval=10, base_ejection_time=10, max_ejection_time=25).ejector(1)
    times = []
    for t in (0.0, 10.0, 30.0, 55.0):
        assert e.heard(0, True, t)
        times.append(e.ejection_time(0))
        assert e.tick(t + times[-1]) == [0]
    assert times == [10, 20, 25, 25]  # backoffs 1, 2, 3 (30 < 35), 4 (40 ≥ 35: stops)
    assert e.backoff[0] == 4
    for t in (90.0, 100.0, 110.0):  # in, healthy, back since 80: one lower a sweep
        e.tick(t)
    assert e.backoff[0] == 1


def test_consecutive_count_starts_again_after_a_refused_ejection():
    """onConsecutiveErrorWorker resets the count after ejectHost, ejected or not: with
    max_ejection_percent refusing, the next attempt needs consecutive_5xx more."""
    e = Envoy(consecutive_5xx=3, max_ejection_percent=0, success_rate=False).ejector(2)
    assert not load(e, 0, 3, True) and e.consecutive[0] == 0
    assert not load(e, 0, 2, True) and e.consecutive[0] == 2


def test_envoy_max_ejection_percent():
    """ejectHost: an ejection that takes the ejected share above max_ejection_percent is
    not made; always_eject_one_host makes the first one anyway."""
    e = Envoy(consecutive_5xx=1, max_ejection_percent=50, success_rate=False).ejector(4)
    assert e.heard(0, True, 0) and e.heard(1, True, 0)
    assert not e.heard(2, True, 0) and e.active == 2
    tight = Envoy(consecutive_5xx=1, max_ejection_percent=10, success_rate=False)
    assert not tight.ejector(4).heard(0, True, 0)
    one = Envoy(consecutive_5xx=1, max_ejection_percent=10, success_rate=False,
                always_eject_one_host=True).ejector(4)
    assert one.heard(0, True, 0) and not one.heard(1, True, 0)


def test_success_rate_ejects_below_mean_minus_factor_stdev():
    """Five hosts with 100 answers each: rates 1, 1, 1, 1, 0.5. Mean 0.9, stdev 0.2:
    the threshold 0.9 − 1.9 × 0.2 = 0.52 ejects the last host; under the request
    volume (99 answers) nothing is judged."""
    e = Envoy(consecutive_5xx=None, max_ejection_percent=100).ejector(5)
    for host in range(5):
        bad = 50 if host == 4 else 0
        load(e, host, 100 - bad, False)
        load(e, host, bad, True)
    assert e.tick(10.0) == [4]
    quiet = Envoy(consecutive_5xx=None, max_ejection_percent=100).ejector(5)
    for host in range(5):
        load(quiet, host, 99, host == 4)
    assert quiet.tick(10.0) == []


@given(st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=300),
       st.floats(0, 100))
def test_never_more_ejected_than_the_limit(answers, percent):
    e = Envoy(consecutive_5xx=2, max_ejection_percent=percent).ejector(10)
    for i, (host, failed) in enumerate(answers):
        e.heard(host, failed, float(i))
        if i % 50 == 49:
            e.tick(float(i))
        assert sum(e.ejected) == e.active <= max(0, int(percent * 10 / 100 + 1e-9))


def test_active_checks_need_their_thresholds_in_a_row():
    c = Active(interval=5, unhealthy_threshold=3, healthy_threshold=2).checker(1)
    assert [c.probed(0, False) for _ in range(3)] == [False, False, True]
    assert c.failing[0]
    assert [c.probed(0, True), c.probed(0, False), c.probed(0, True), c.probed(0, True)] == \
        [False, False, False, True]
    assert not c.failing[0]


def test_interval_must_be_given_for_active_checks():
    with pytest.raises(ValueError, match="interval"):
        Active.model_validate({})

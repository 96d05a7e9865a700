"""The admission limiters against their libraries' own unit tests, fed the same sample
sequences with no SimPy at all, and two pathologies the libraries' users reported.

Sources (the test each function ports is named in its docstring):
Netflix/concurrency-limits@78a74b9878d38c4c048b0304ce12a162ab7b7222,
``concurrency-limits-core/src/test/java/com/netflix/concurrency/limits/limit/`` (AIMD,
Vegas, ExpAvgMeasurement, Log10RootIntFunction; the library ships no Gradient2 test), and
envoyproxy/envoy@db7eb63b224c816d9dea4609105156ddf90d479e,
``test/extensions/filters/http/adaptive_concurrency/controller/gradient_controller_test.cc``.
The Java tests give times in nanoseconds; these give seconds.
"""

from __future__ import annotations

import pytest

from herdsim.policies.limiters.aimd import AIMDLimit
from herdsim.policies.limiters.envoy import GradientController
from herdsim.policies.limiters.fixed import FixedLimit
from herdsim.policies.limiters.gradient2 import ExpAvgMeasurement, Gradient2Limit
from herdsim.policies.limiters.histogram import quantile
from herdsim.policies.limiters.vegas import VegasLimit, log10_root
from herdsim.policies.limiters.window import WindowedLimit

MS = 1e-3


def never():  # a uniform draw that never probes (Vegas) and adds no jitter
    return 0.999999


# -- Netflix AIMD (AIMDLimitTest) -------------------------------------------------------

def test_aimd_default():
    """testDefault: the initial limit is the limit."""
    assert AIMDLimit(initial_limit=10).limit == 10


def test_aimd_increase_on_success():
    """increaseOnSuccess: 20 -> 21 on a 1 ms sample with 10 in flight."""
    limit = AIMDLimit(initial_limit=20)
    limit.on_sample(0, 1 * MS, 10, False)
    assert limit.limit == 21


def test_aimd_decrease_on_drops():
    """decreaseOnDrops: 30 -> 27 on a drop."""
    limit = AIMDLimit(initial_limit=30)
    limit.on_sample(0, 0, 0, True)
    assert limit.limit == 27


def test_aimd_success_overflow():
    """successOverflow: the limit stays at its maximum."""
    limit = AIMDLimit(initial_limit=21, max_limit=21, min_limit=0)
    limit.on_sample(0, 1 * MS, 10, False)
    assert limit.limit == 21


def test_aimd_rtt_above_timeout_is_a_drop():
    """AIMDLimit._update: ``rtt > timeout`` backs off like a drop (5 s by default)."""
    limit = AIMDLimit(initial_limit=100)
    limit.on_sample(0, 5.001, 100, False)
    assert limit.limit == 90


# -- Netflix Vegas (VegasLimitTest) -----------------------------------------------------

def vegas(**fields) -> VegasLimit:
    """VegasLimitTest.create(): alpha 3, beta 6, smoothing 1, initial 10, max 20."""
    base = dict(alpha=lambda _: 3, beta=lambda _: 6, smoothing=1.0, initial_limit=10,
                max_limit=20)
    return VegasLimit(never, **(base | fields))


def test_vegas_large_limit_increase():
    """largeLimitIncrease: 10000 -> 10024 (beta = 6 × log10 10000)."""
    limit = VegasLimit(never, initial_limit=10000, max_limit=20000)
    limit.on_sample(0, 10.0, 5000, False)
    assert limit.limit == 10000
    limit.on_sample(0, 10.0, 6000, False)
    assert limit.limit == 10024


def test_vegas_increase_limit():
    limit = vegas()
    limit.on_sample(0, 10 * MS, 10, False)
    assert limit.limit == 10
    limit.on_sample(0, 10 * MS, 11, False)
    assert limit.limit == 16


def test_vegas_decrease_limit():
    limit = vegas()
    limit.on_sample(0, 10 * MS, 10, False)
    assert limit.limit == 10
    limit.on_sample(0, 50 * MS, 11, False)
    assert limit.limit == 9


def test_vegas_no_change_within_thresholds():
    limit = vegas()
    limit.on_sample(0, 10 * MS, 10, False)
    assert limit.limit == 10
    limit.on_sample(0, 14 * MS, 14, False)
    assert limit.limit == 10


@pytest.mark.parametrize(("smoothing", "expected"), [(0.5, (75, 56)), (1.0, (50, 25))])
def test_vegas_decrease_smoothing(smoothing, expected):
    """decreaseSmoothing and decreaseWithoutSmoothing: decrease = halve."""
    limit = VegasLimit(never, decrease=lambda current: current / 2, smoothing=smoothing,
                       initial_limit=100, max_limit=200)
    limit.on_sample(0, 10 * MS, 100, False)
    assert limit.limit == 100
    limit.on_sample(0, 20 * MS, 100, False)
    assert limit.limit == expected[0]
    limit.on_sample(0, 20 * MS, 100, False)
    assert limit.limit == expected[1]


def test_log10_root():
    """Log10RootIntFunctionTest: 0 -> 1, 100 -> 2, 10000 -> 4."""
    assert (log10_root(0), log10_root(100), log10_root(10000)) == (1, 2, 4)


def test_vegas_probe_resets_rtt_noload():
    """VegasLimit.shouldProbe: after jitter × 30 × limit samples, one resets rtt_noload."""
    limit = VegasLimit(lambda: 0.0, initial_limit=10)  # jitter 0.5: a probe every 150
    limit.on_sample(0, 10 * MS, 1, False)
    for _ in range(148):
        limit.on_sample(0, 40 * MS, 1, False)
    assert limit.rtt_noload == 10 * MS
    limit.on_sample(0, 40 * MS, 1, False)
    assert limit.rtt_noload == 40 * MS


# -- Netflix Gradient2 (the library has no unit test: its ExpAvgMeasurement's) ------------

def test_exp_avg_measurement_warmup():
    """ExpAvgMeasurementTest.testWarmup."""
    avg = ExpAvgMeasurement(100, 10)
    expected = [10.0, 10.5, 11, 11.5, 12, 12.5, 13, 13.5, 14, 14.5]
    for i in range(10):
        assert avg.add(i + 10) == pytest.approx(expected[i], abs=0.01)
    assert avg.add(100) == pytest.approx(16.2, abs=0.1)


def test_gradient2_steady_rtt_adds_four_fifths():
    """Gradient2Limit._update with a steady rtt: gradient 1, limit × 0.8 + (limit + 4) ×
    0.2 = limit + 0.8 per update; app-limited samples (inflight < limit / 2) change
    nothing."""
    limit = Gradient2Limit()
    limit.on_sample(0, 10 * MS, 9, False)
    assert limit.estimated == 20
    for k in range(1, 6):
        limit.on_sample(0, 10 * MS, 20, False)
        assert limit.estimated == pytest.approx(20 + 0.8 * k)


def test_gradient2_halves_at_most():
    """After the 10-sample warm-up at 10 ms, a 200 ms sample (long rtt 10.6 ms): the
    gradient is clamped to 0.5: 40 → 40 × 0.8 + (40 × 0.5 + 4) × 0.2."""
    limit = Gradient2Limit(initial_limit=40, max_limit=40)
    for _ in range(10):
        limit.on_sample(0, 10 * MS, 40, False)
    limit.on_sample(0, 200 * MS, 40, False)
    assert limit.estimated == pytest.approx(40 * 0.8 + (40 * 0.5 + 4) * 0.2)


def test_gradient2_timeouts_drive_the_limit_to_its_maximum():
    """concurrency-limits #137: every rtt equal to the client timeout (5 s), every call a
    drop: Gradient2 ignores drops and sees no gradient, so the limit climbs to max."""
    limit = Gradient2Limit()
    for _ in range(300):
        limit.on_sample(0, 5.0, limit.limit, True)
    assert limit.limit == 200


def test_gradient2_queue_term_outruns_capacity():
    """A comment on PR #134: under overload the ``+ queue_size`` term keeps the limit
    growing. A server with 50 slots and 10 ms calls, always saturated: the rtt grows with
    the limit (Little: rtt = 10 ms × limit / 50), yet the long rtt follows it and the
    gradient never leaves 1, so the limit climbs to its maximum, 20× the capacity."""
    limit = Gradient2Limit(initial_limit=60, max_limit=1000)
    for _ in range(5000):
        current = limit.limit
        limit.on_sample(0, 10 * MS * max(1.0, current / 50), current, False)
    assert limit.limit == 1000
    # with a fixed gradient g < 1 instead, the limit settles at queue_size / (1 - g)
    fixed = Gradient2Limit(initial_limit=100, min_limit=1, max_limit=1000, smoothing=0.2)
    fixed.long_rtt.add = lambda rtt: 0.9 * rtt / 1.5  # pins the gradient at 0.9
    for _ in range(2000):
        fixed.on_sample(0, 10 * MS, 1000, False)
    assert fixed.estimated == pytest.approx(4 / (1 - 0.9), rel=1e-6)


def test_windowed_limit_feeds_one_sample_per_window():
    """WindowedLimit: the first window closes at once (with 1 sample: thrown away); the
    next closes after 1 s with the mean rtt and the largest inflight."""
    seen = []

    class Spy:
        limit = 7

        def on_sample(self, start, rtt, inflight, dropped):
            seen.append((rtt, inflight, dropped))

    windowed = WindowedLimit(Spy())
    windowed.on_sample(0.0, 0.01, 1, False)
    assert seen == [] and windowed.next_update == pytest.approx(1.01)
    for k in range(10):
        windowed.on_sample(0.1 * k, 0.01 + 0.001 * k, k, k == 3)
    windowed.on_sample(1.5, 0.05, 2, False)  # ends at 1.55 > 1.01: the window closes
    assert seen == [(pytest.approx((sum(0.01 + 0.001 * k for k in range(10)) + 0.05) / 11),
                     9, True)]
    assert windowed.limit == 7


def test_fixed_limit():
    limit = FixedLimit(5)
    limit.sample(1.0, 0.0, 5, True)
    assert limit.limit_at(2.0) == 5


# -- Envoy's gradient controller (gradient_controller_test.cc) -------------------------

@pytest.mark.parametrize(("q", "samples_us", "read"), [
    (0.5, [1000, 2000, 3000, 4000, 5000], 3050),
    (0.5, [61000, 72000, 83000, 94000], 73000),  # even n: the top of the 2nd one's bin
    (0.5, [5000] * 5, 5050),
    (0.5, [13000] * 50, 13500),
    (0.0, [465678, 1592000], 459999),  # the bin's left edge, 459999.99999999994
    (0.9, [3, 17, 250, 69123, 69999, 70000, 1000000], 1030000),
    (0.5, [86600, 120000, 45000], 86500),
])
def test_envoy_reads_the_percentile_as_libcircllhist_does(q, samples_us, read):
    """The values are libcircllhist's own output (src/circllhist.c @63a16dd6, the commit
    Envoy pins, compiled; ``hist_insert`` of each value, ``hist_approx_quantile``, then
    Envoy's ``static_cast<int>``)."""
    assert int(quantile(samples_us, q)) == read


def min_rtt_msecs(ctl: GradientController) -> int:
    """The ``min_rtt_msecs`` gauge Envoy's tests read: minRTT cast to whole ms."""
    return ctl.min_rtt_us // 1000


class Harness:
    """The test fixture: simulated time, forwardingDecision and recordLatencySample."""

    def __init__(self, **config):
        self.now = 0.0
        self.ctl = GradientController(never, start=0.0, **config)
        self.now += 42 * 3600  # "advance time so the latency calculations don't underflow"
        self.outstanding = 0

    def forward(self) -> bool:
        if self.outstanding < self.ctl.limit_at(self.now):
            self.outstanding += 1
            return True
        return False

    def sample(self, latency: float) -> None:
        self.outstanding -= 1
        self.ctl.sample(self.now, self.now - latency, self.outstanding, False)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def run(self) -> int:
        return self.ctl.limit_at(self.now)

    def past_min_rtt(self, latency: float = 5 * MS) -> None:
        for _ in range(self.ctl.request_count + 1):
            assert self.forward()
            self.sample(latency)


BASIC = dict(interval=0.1, jitter=0.0, min_rtt_interval=30.0, request_count=5)


def test_envoy_concurrency_limit_behavior_basic():
    """ConcurrencyLimitBehaviorTestBasic."""
    h = Harness(**BASIC, buffer=0.10, min_concurrency=7)
    assert h.run() == 7
    h.past_min_rtt(5 * MS)
    assert min_rtt_msecs(h.ctl) == 5
    h.advance(0.101)
    assert h.run() >= 7 and h.run() / 7.0 <= 2.0
    for _ in range(10):  # latencies below minRTT: the limit grows, at most 2× a window
        last = h.run()
        for _ in range(5):
            assert h.forward()
            h.sample(4 * MS)
        h.advance(0.101)
        assert last <= h.run() and last / h.run() >= 0.5
    for _ in range(10):  # above minRTT × 1.1: it shrinks, never below the minimum
        last = h.run()
        for _ in range(5):
            assert h.forward()
            h.sample(6 * MS)
        h.advance(0.101)
        assert h.run() < last and h.run() >= 7


def test_envoy_min_rtt_return_to_previous_limit():
    """MinRTTReturnToPreviousLimit."""
    h = Harness(**BASIC)
    assert h.run() == 3
    h.past_min_rtt(5 * MS)
    h.advance(1.0)
    for _ in range(5):
        last = h.run()
        for _ in range(5):
            assert h.forward()
            h.sample(4 * MS)
        h.advance(0.101)
        assert h.run() > last
    limit = h.run()
    h.advance(31.0)
    assert h.run() == 3
    h.advance(1.0)
    for _ in range(5):
        assert h.run() == 3
        assert h.forward()
        h.sample(13 * MS)
    assert h.run() == limit


def test_envoy_min_rtt_logic():
    """MinRTTLogicTest: the limit is min_concurrency while minRTT is measured."""
    h = Harness(interval=0.1, jitter=0.0, min_rtt_interval=30.0, request_count=50,
                min_concurrency=7)
    assert h.run() == 7
    assert all(h.forward() for _ in range(7))
    assert not h.forward() and not h.forward()
    h.advance(13 * MS)
    for _ in range(7):
        h.sample(13 * MS)
    for _ in range(43):
        assert h.run() == 7
        assert h.forward()
        h.sample(13 * MS)
    assert not h.ctl.in_min_rtt_window
    assert min_rtt_msecs(h.ctl) == 13


def test_envoy_min_rtt_is_the_median():
    """CancelLatencySample: samples of 1..5 ms give minRTT 3 ms."""
    h = Harness(**BASIC)
    for i in range(1, 6):
        assert h.forward()
        h.sample(i * MS)
    assert min_rtt_msecs(h.ctl) == 3


def test_envoy_min_rtt_epoch():
    """MinRTTEpoch: calls started before a minRTT window are not sampled in it."""
    h = Harness(interval=0.1, jitter=0.0, min_rtt_interval=30.0, request_count=25,
                min_concurrency=2, buffer=0.0)
    h.advance(1.35)
    assert h.run() == 2
    h.past_min_rtt(1.35)
    assert not h.ctl.in_min_rtt_window
    last = h.run()
    for _ in range(29):
        assert h.forward()
        h.advance(1.0)
        h.sample(1.35)
        assert h.run() > last
        last = h.run()
    started = 0
    for _ in range(h.run()):
        assert h.forward()
        started += 1
    h.advance(5.0)
    assert h.run() == 2 and h.ctl.in_min_rtt_window
    assert started > 25
    for _ in range(started):
        h.sample(300.0)  # sent five minutes ago: from an older epoch
    assert h.ctl.in_min_rtt_window


def test_envoy_no_samples_no_change():
    """NoSamplesTest: empty windows leave the limit alone."""
    h = Harness(**BASIC)
    h.past_min_rtt(5 * MS)
    for _ in range(5):
        for _ in range(5):
            assert h.forward()
            h.sample(4 * MS)
        h.advance(0.101)
    limit = h.run()
    for _ in range(5):
        h.advance(0.101)
        assert h.run() == limit


def test_envoy_consecutive_min_concurrency_reset():
    """ConsecutiveMinConcurrencyReset: five windows at the minimum start a minRTT window,
    and the limit grows again from the new minRTT."""
    h = Harness(interval=0.1, jitter=0.0, min_rtt_interval=3600.0, request_count=5,
                buffer=0.0, min_concurrency=7)
    h.past_min_rtt(5 * MS)
    h.advance(0.101)
    assert 7 <= h.run() <= 14
    for _ in range(5):
        for _ in range(5):
            assert h.forward()
            h.sample(10 * MS)
        h.advance(0.101)
        h.run()
    for _ in range(10):
        last = h.run()
        for _ in range(5):
            assert h.forward()
            h.sample(10 * MS)
        h.advance(0.101)
        assert h.run() >= last
    assert min_rtt_msecs(h.ctl) == 10


def test_envoy_jitter_within_its_share():
    """TimerAccuracyTest: the next minRTT window starts interval + random % (interval ×
    jitter) ms later (jitter 10 % of 100 s: at most 10 s)."""
    ctl = GradientController(lambda: 0.5, interval=0.123, min_rtt_interval=100.0,
                             request_count=5, jitter=0.10)
    for _ in range(5):
        ctl.sample(0.005, 0.0, 0, False)
    assert ctl.min_rtt_due == pytest.approx(0.005 + 105.0)
    assert ctl.sample_due == pytest.approx(0.005 + 0.123)

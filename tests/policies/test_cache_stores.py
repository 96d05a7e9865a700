"""The cache's pure rules: the LRU and TTL stores against oracles written from their
definitions (functools.lru_cache for plain LRU), the key distributions against their
laws, the fixed-window counter against a brute-force count, and the section's refusals."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from herdsim import load_scenario
from herdsim.errors import ScenarioError
from herdsim.policies.cache import HIT, MISS, STALE, Cache, LruStore, TtlStore
from herdsim.policies.cache.keys import Uniform, Zipf
from herdsim.policies.rate_limit import FixedWindowCounter

keys = st.lists(st.integers(1, 12), min_size=1, max_size=200)


@settings(max_examples=200, deadline=None)
@given(keys, st.integers(1, 8))
def test_lru_answers_as_functools_lru_cache(requests, size):
    """Read-through (a miss is filled at once): the same hits as functools.lru_cache."""
    @functools.lru_cache(maxsize=size)
    def oracle(key):
        return key

    store = LruStore(size)
    for key in requests:
        before = oracle.cache_info().hits
        oracle(key)
        hit = oracle.cache_info().hits > before
        answer = store.lookup(key, 0.0)
        assert (answer == HIT) == hit
        if answer == MISS:
            store.fill(key, 0.0)
        assert len(store) <= size


@settings(max_examples=200, deadline=None)
@given(keys, st.integers(1, 8), st.lists(st.booleans(), min_size=200, max_size=200))
def test_evict_on_miss_evicts_the_least_recently_used_even_unfilled(requests, size, fills):
    """With evict_on_miss, a miss on a full store drops its least recently used key
    whether or not the key is filled afterwards (a recency list as the oracle)."""
    store = LruStore(size, evict_on_miss=True)
    recency: list[int] = []  # least recently used first
    for key, filled in zip(requests, fills, strict=False):
        hit = key in recency
        if hit:
            recency.remove(key)
            recency.append(key)
        elif len(recency) >= size:
            recency.pop(0)
        assert (store.lookup(key, 0.0) == HIT) == hit
        if not hit and filled:
            store.fill(key, 0.0)
            if len(recency) >= size:
                recency.pop(0)
            recency.append(key)
        assert list(store.entries) == recency


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.floats(0, 2)), min_size=1, max_size=100),
       st.integers(1, 5), st.floats(0.05, 1.0), st.floats(0, 0.5))
def test_ttl_is_fresh_for_ttl_then_stale_for_stale(steps, size, ttl, stale):
    """A dict oracle: an entry is a hit while younger than ttl, stale until ttl + stale,
    then dropped; LRU order decides what a full store evicts."""
    store = TtlStore(size, ttl, stale)
    filled: dict[int, float] = {}
    order: list[int] = []
    now = 0.0
    for key, step in steps:
        now += step
        if key in filled and now - filled[key] < ttl + stale:
            expected = HIT if now - filled[key] < ttl else STALE
            order.remove(key)
            order.append(key)
        else:
            expected = MISS
            if key in filled:
                del filled[key]
                order.remove(key)
        assert store.lookup(key, now) == expected
        if expected != HIT:  # a miss, or a stale entry refreshed at once
            if key not in filled and len(order) >= size:
                del filled[order.pop(0)]
            if key in order:
                order.remove(key)
            filled[key] = now
            order.append(key)
            store.fill(key, now)
        assert dict(store.entries) == filled


def test_flush_empties_the_store():
    store = LruStore(3)
    store.prime([1, 2, 3])
    store.flush()
    assert len(store) == 0 and store.lookup(1, 0.0) == MISS


def test_a_warm_cache_is_primed_with_keys_one_to_size_in_order():
    store = Cache(size=4, keys={"distribution": "zipf", "alpha": 1.2}).store()
    assert list(store.entries) == [1, 2, 3, 4]  # key 1 least recently used
    assert len(Cache(size=4, warm=False, keys={"distribution": "uniform", "count": 9}
                     ).store()) == 0


@pytest.mark.parametrize("count", [50, 2_000_000])  # the table, then redrawn numpy draws
def test_zipf_keys_follow_k_to_the_minus_alpha(count):
    """The top keys' frequencies against k^-alpha / sum_{j<=count} j^-alpha, within 5
    binomial standard errors; no key beyond count."""
    alpha, n = 1.3, 200_000
    law = Zipf(distribution="zipf", alpha=alpha, count=count)
    drawn = law.sampler(np.random.default_rng(7))(n)
    assert drawn.min() >= 1 and drawn.max() <= count
    total = (np.arange(1, count + 1, dtype=float) ** -alpha).sum()
    for k in (1, 2, 3, 10):
        p = k ** -alpha / total
        assert abs((drawn == k).mean() - p) < 5 * np.sqrt(p * (1 - p) / n)


def test_unbounded_zipf_is_numpys():
    law = Zipf(distribution="zipf", alpha=1.3, count=None)
    drawn = law.sampler(np.random.default_rng(3))(100_000)
    zeta = (np.arange(1, 2_000_000, dtype=float) ** -1.3).sum() + 2e6 ** -0.3 / 0.3
    assert abs((drawn == 1).mean() - 1 / zeta) < 5 * np.sqrt(0.25 * 0.75 / 100_000)


def test_uniform_keys_cover_their_range_evenly():
    drawn = Uniform(distribution="uniform", count=10).sampler(np.random.default_rng(1))(50_000)
    counts = np.bincount(drawn, minlength=11)[1:]
    assert drawn.min() == 1 and drawn.max() == 10
    assert np.all(np.abs(counts - 5_000) < 5 * np.sqrt(5_000 * 0.9))


UNIFORM = {"distribution": "uniform", "count": 10}


@pytest.mark.parametrize(("fields", "blamed"), [
    ({"size": 5, "keys": UNIFORM, "eviction": {"policy": "lru", "ttl": "1s"}},
     "only a ttl eviction has ttl"),
    ({"size": 5, "keys": UNIFORM, "eviction": {"policy": "fifo"}}, "unknown policy 'fifo'"),
    ({"size": 10, "keys": {"distribution": "zipf", "alpha": 1.0}}, "unbounded"),
    ({"size": 10, "keys": {"distribution": "zipf", "alpha": 1.05, "count": 10**8}},
     "at most 1,000,000 keys"),
    ({"size": 10, "keys": {"distribution": "uniform", "count": 5}}, "size at most count"),
    ({"size": 10**8, "keys": UNIFORM}, "less than or equal to 10000000"),
    ({"size": 10}, "keys"),
    ({"size": 10, "keys": {"distribution": "uniform"}}, "count"),
])
def test_a_cache_field_out_of_place_is_refused_naming_it(fields, blamed):
    with pytest.raises(ValidationError, match=blamed):
        Cache(**fields)


def test_hit_latency_takes_a_duration_or_a_distribution():
    assert Cache(size=1, keys=UNIFORM, hit_latency="2ms").latency().mean == \
        pytest.approx(0.002)
    assert Cache(size=1, keys=UNIFORM, hit_latency=0).latency() is None
    lat = Cache(size=1, keys=UNIFORM,
                hit_latency={"distribution": "exponential", "mean": "1ms"})
    assert lat.latency().name() == "exponential"


def _brute_window(times, limit, window):
    """The rule as written in words: a window opens at the first call more than `window`
    after the last one opened; every call counts; the first `limit` pass."""
    opened, count, out = 0.0, 0, []
    for t in times:
        if t - opened > window:
            opened, count = t, 0
        count += 1
        out.append(count <= limit)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 0.7), min_size=1, max_size=60), st.integers(1, 5),
       st.floats(0.1, 2.0))
def test_fixed_window_against_a_count(gaps, limit, window):
    times = np.cumsum(gaps).tolist()
    counter = FixedWindowCounter(limit, window)
    assert [counter.take(t) for t in times] == _brute_window(times, limit, window)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 0.7), min_size=1, max_size=30), st.integers(1, 3),
       st.floats(0.1, 2.0))
def test_fixed_window_wait_is_when_the_next_call_passes(gaps, limit, window):
    """wait(now) is the least wait after which a call passes (to a few ulps)."""
    counter = FixedWindowCounter(limit, window)
    now = 0.0
    for gap in gaps:
        now += gap
        counter.take(now)
    wait = counter.wait(now)
    probe = FixedWindowCounter(limit, window)
    probe.opened, probe.count = counter.opened, counter.count
    assert probe.take(now + wait)
    if wait > 0:
        early = FixedWindowCounter(limit, window)
        early.opened, early.count = counter.opened, counter.count
        assert not early.take(now + wait * (1 - 1e-9) - 1e-12)


@pytest.mark.parametrize(("latency", "blamed"), [
    ("-1ms", "hit_latency: Input should be greater than or equal to 0"),
    ("abc", "hit_latency: expected a duration such as 250ms"),
    ({"distribution": "exponential", "mean": "-1ms"},
     "hit_latency.mean: Input should be greater than 0"),
    ({"distribution": "bogus", "mean": "1ms"}, "hit_latency.distribution: unknown distribution"),
])
def test_a_bad_hit_latency_is_one_problem_naming_the_field(make_scenario, latency, blamed):
    """A duration or a distribution: a bad one is refused once, as what it was given as
    (a negative duration was also reported as 'expected a section (a mapping)' under the
    union's inner name, two lines for one mistake)."""
    data = make_scenario()
    data["downstream"]["cache"] = {"size": 1, "keys": UNIFORM, "hit_latency": latency}
    with pytest.raises(ScenarioError) as caught:
        load_scenario(data)
    (field, message), = caught.value.problems
    assert f"downstream.cache.{blamed}" in f"{field}: {message}"

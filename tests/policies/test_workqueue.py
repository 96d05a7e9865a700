"""client-go's workqueue rate limiter and queue, against client-go's numbers and
controller-runtime #1594."""

from __future__ import annotations

import pytest

from herdsim.policies.workqueue import Bucket, ItemExponential, WorkQueue, controller_delay


def test_item_exponential_doubles_from_5ms_and_caps_at_1000s():
    """DefaultControllerRateLimiter's per-item part: 5 ms · 2^(failures), so the 18th
    failure waits 5 ms · 2^17 = 655.36 s and the 19th is capped at 1000 s; Forget starts
    the item over (and other items are their own)."""
    items = ItemExponential()
    delays = [items.when("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.010, 0.020, 0.040]
    assert delays[17] == pytest.approx(655.36)
    assert delays[18] == delays[19] == 1000.0
    assert items.when("b") == 0.005
    items.forget("a")
    assert items.when("a") == 0.005


def test_client_go_item_exponential_vectors():
    """default_rate_limiters_test.go TestItemExponentialFailureRateLimiter: base 1 ms,
    max 1 s: 1, 2, 4, 8, 16 ms; a second item starts at 1 ms."""
    items = ItemExponential(0.001, 1.0)
    assert [items.when("one") for _ in range(5)] == [0.001, 0.002, 0.004, 0.008, 0.016]
    assert [items.when("two") for _ in range(2)] == [0.001, 0.002]
    assert items.failures == {"one": 5, "two": 2}


def test_the_bucket_is_x_time_rate_reserve_delay():
    """rate.NewLimiter(10, 100): the first 100 reservations at once are free, the next
    ones wait 0.1 s more each (the debt over the rate); a second later the 3 owed are
    paid and 7 tokens are left."""
    bucket = Bucket()
    delays = [bucket.reserve(0.0) for _ in range(103)]
    assert delays[:100] == [0.0] * 100
    assert delays[100:] == pytest.approx([0.1, 0.2, 0.3])
    assert bucket.reserve(1.0) == 0.0
    assert bucket.tokens == pytest.approx(6.0)
    both = ItemExponential()
    assert controller_delay(both, bucket, "x", 1.0) == 0.005  # the larger of the two
    drained = Bucket(10, 1)
    drained.reserve(0.0)
    assert controller_delay(both, drained, "y", 0.0) == pytest.approx(0.1)
    assert both.failures == {"x": 1, "y": 1}  # MaxOf asks every limiter


def test_an_item_queued_twice_is_one_and_one_in_process_comes_back_once():
    """queue.go: Add of a dirty item is dropped; Add while processing marks it dirty and
    Done queues it again, once."""
    q = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert list(q.queue) == ["a", "b"]
    assert q.get() == "a"
    q.add("a")
    q.add("a")
    assert list(q.queue) == ["b"]  # in process: not queued twice
    q.done("a")
    assert list(q.queue) == ["b", "a"]
    assert q.get() == "b" and q.get() == "a" and q.get() is None


def test_add_after_keeps_the_earliest_ready_time():
    """delaying_queue.go insert: a waiting item's ready time only moves earlier."""
    q = WorkQueue()
    q.add_after("a", 5.0, 0.0)
    q.add_after("a", 9.0, 1.0)
    assert q.next_ready() == 5.0
    q.add_after("a", 1.0, 1.0)
    assert q.next_ready() == 2.0
    q.release(2.0)
    assert list(q.queue) == ["a"] and q.next_ready() == float("inf")


def test_controller_runtime_1594_gaps_grow_geometrically():
    """controller-runtime #1594: a RateLimitingQueue on BucketRateLimiter(rate.Every(200
    ms), burst 1), the same item AddRateLimited every 100 ms (twice the drain rate), a
    reader that Gets and Dones at once. Every AddRateLimited reserves a token (the debt
    grows by 5 tokens a second) while the waiting item keeps its earlier ready time, so
    each read waits as long as everything before it: the gaps between reads double,
    S · X^N with S = 200 ms and X = 2 (the issue's own words)."""
    bucket, q = Bucket(rate=5.0, burst=1), WorkQueue()
    reads, write = [], 0
    while len(reads) < 9:
        now = min(write * 0.1, q.next_ready())
        q.release(now)
        item = q.get()
        if item is not None:
            reads.append(now)
            q.done(item)
            continue
        if write * 0.1 <= now:
            q.add_after("item", bucket.reserve(now), now)
            write += 1
    gaps = [b - a for a, b in zip(reads, reads[1:], strict=False)]
    ratios = [b / a for a, b in zip(gaps, gaps[1:], strict=False)]
    assert ratios == pytest.approx([2.0] * len(ratios))
    assert gaps[-1] == pytest.approx(0.1 * 2 ** 7)  # 12.8 s; 17 reads on, an hour


def test_k8s_workqueue_sleeps_are_the_max_of_exponential_and_the_bucket():
    """A run under the preset: every retry's sleep is max(5 ms · 2^attempt capped at
    1000 s, the delay of a 10/s burst-100 bucket replayed over the retries in order)."""
    import herdsim

    sc = herdsim.load_scenario({
        "name": "k8s", "duration": "10s", "seed": 2, "workload": {"rate": 200},
        "workers": {"count": 50}, "retry": {"preset": "k8s-workqueue"},
        "downstream": {"concurrency": 50, "service": {"mean": "20ms"},
                       "outages": [{"start": "2s", "duration": "1s"}]}})
    sleeps = herdsim.run(sc).sleeps
    assert len(sleeps) > 300  # the outage drains the bucket: some sleeps are its delay
    bucket = Bucket()
    expected = [max(min(0.005 * 2.0 ** a, 1000.0), bucket.reserve(t))
                for t, a in zip(sleeps["time"], sleeps["attempt"], strict=True)]
    assert sleeps["sleep"].tolist() == expected
    assert (sleeps["sleep"] > 0.005 * 2.0 ** sleeps["attempt"]).any()

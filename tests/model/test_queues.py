"""``workload.keys``: client-go's workqueue rules inside the simulated main queue.

The oracle is client-go itself, read at v0.36.3: a small reference queue below is written
from ``util/workqueue/queue.go`` (``Add`` :227-251, ``Get`` :265-284, ``Done`` :289-302)
and ``delaying_queue.go`` (``AddAfter`` :249-268, the waiting loop :297-307, ``insert``
:355-369), and Hypothesis drives it and herdsim's queues with the same operations; the
per-key backoff against ``default_rate_limiters.go`` :116-149; whole runs against
conservation (counted from the saved ``jobs.parquet``), against the run without keys
(many keys: nothing collapses) and against what one key predicts (one reconcile at a
time, back to back).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import simpy
from hypothesis import example, given, settings
from hypothesis import strategies as st

import herdsim
from herdsim.model.queues import KeyedDelayedQueue, KeyedQueue
from herdsim.model.workload import make_job
from herdsim.policies.workqueue import Bucket, ItemExponential


class ClientGoQueue:
    """client-go's rate-limiting queue as its Go source says, one goroutine at a time.

    A blocked ``Get`` is a waiter; ``cond.Signal`` after a ``Push`` wakes the oldest, which
    pops the head (Go's notify list is FIFO). ``collapsed`` counts the adds that made no
    new entry: ``Add`` of a dirty item, ``insert`` of an item already waiting."""

    def __init__(self) -> None:
        self.queue: list = []
        self.dirty: set = set()
        self.processing: set = set()
        self.waiting: dict = {}  # waitingEntryByData: item -> readyAt
        self.waiters = 0
        self.handed: list = []
        self.collapsed = 0

    def add(self, item) -> None:
        if item in self.dirty:  # queue.go:233-240
            self.collapsed += 1
            return
        self.dirty.add(item)  # :244
        if item in self.processing:  # :245-247
            return
        self.queue.append(item)  # :249-250, Push and Signal
        self._signal()

    def get(self) -> None:
        if not self.queue:  # :268-270, Wait
            self.waiters += 1
            return
        self.handed.append(self._pop())

    def done(self, item) -> None:
        self.processing.discard(item)  # :295
        if item in self.dirty:  # :296-298
            self.queue.append(item)
            self._signal()

    def add_after(self, item, ready: float) -> None:
        if item in self.waiting:  # insert, delaying_queue.go:357-365
            self.collapsed += 1
            self.waiting[item] = min(self.waiting[item], ready)
            return
        self.waiting[item] = ready

    def release(self, now: float) -> None:
        """The waiting loop at *now*: every entry ready by then, earliest first, is Added."""
        for item, ready in sorted(self.waiting.items(), key=lambda entry: entry[1]):
            if ready <= now:
                del self.waiting[item]
                self.add(item)

    def _pop(self):
        item = self.queue.pop(0)  # Get, queue.go:276-281
        self.processing.add(item)
        self.dirty.discard(item)
        return item

    def _signal(self) -> None:
        if self.waiters:
            self.waiters -= 1
            self.handed.append(self._pop())


POLL = 1.0
operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 2)),
    st.tuples(st.just("get")),
    st.tuples(st.just("done"), st.integers(0, 10)),
    st.tuples(st.just("after"), st.integers(0, 2), st.integers(1, 3000)),
    st.tuples(st.just("wait")),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops=operations)
@example(ops=[("after", 0, 2900), ("after", 0, 100), ("wait",)])  # insert keeps the earlier
@example(ops=[("add", 0), ("get",), ("add", 0), ("add", 0), ("get",), ("done", 0)])
def test_the_simulated_queue_hands_out_client_gos_keys(ops):
    """The same Add / Get / Done / AddAfter / time passing on herdsim's keyed queues and on
    the reference: the same keys handed out, in the same order, the same queue length after
    every step, and one merged job for every add client-go absorbs. Operations happen at
    t = k + 0.5, the poller at whole seconds; a parked job's due time is unique."""
    env = simpy.Environment()
    merged: list = []
    queue = KeyedQueue(env, None, None,  # no arrivals: the operations are the jobs
                       lambda job, t: merged.append(job))
    delayed = KeyedDelayedQueue(env, queue, POLL, lambda job, t: merged.append(job))
    ref = ClientGoQueue()
    handed: list = []
    in_hand: list = []
    env.run(until=0.5)

    def flush():  # events due now (a job handed to a waiting worker)
        while env.peek() == env.now:
            env.step()

    def got(job):
        handed.append(job.key)
        in_hand.append(job)

    for step, op in enumerate(ops):
        if op[0] == "add":
            job = make_job(step, False, 0.0)
            job.key = op[1]
            queue.put(job)
            ref.add(op[1])
        elif op[0] == "get":
            job = queue.take(env.now)
            if job is None:
                queue.get().callbacks.append(lambda event: got(event.value))
            else:
                got(job)
            ref.get()
        elif op[0] == "done" and in_hand:
            job = in_hand.pop(op[1] % len(in_hand))
            queue.done(job)
            ref.done(job.key)
        elif op[0] == "after":
            job = make_job(step, False, 0.0)
            job.key = op[1]
            due = env.now + op[2] / 1000 + step * 1e-9
            delayed.add(due, job)
            ref.add_after(op[1], due)
        elif op[0] == "wait":
            env.run(until=env.now + 1.0)
            ref.release(math.floor(env.now))
        flush()
        assert handed == ref.handed
        assert len(queue) == len(ref.queue)
    assert len(merged) == ref.collapsed


def keyed(keys: int | None, **changes) -> dict:
    """A small run under an outage; *changes* replace whole sections' fields."""
    spec = {"name": "keys", "duration": "6s", "seed": 7,
            "workload": {"rate": 300, "poison_fraction": 0.05},
            "workers": {"count": 40},
            "downstream": {"concurrency": 20, "service": {"mean": "20ms"},
                           "outages": [{"start": "2s", "duration": "1s"}]},
            "retry": {"strategy": "exponential", "base": "50ms", "max_retries": 4}}
    for section, fields in changes.items():
        spec[section] = {**spec.get(section, {}), **fields}
    if keys is not None:
        spec["workload"] = {**spec["workload"], "keys": keys}
    return spec


def test_one_poison_key_backs_off_5ms_doubling_to_655_36s_then_1000s():
    """default_rate_limiters.go:116-135 through a run: one key failing for good under the
    k8s-workqueue preset waits 5 ms · 2^failures, so the 18th failure waits 655.36 s and
    the 19th and later are capped at 1000 s (the bucket's 100 tokens never run out here).
    The poller runs every 100 ms instead of 1 ms: it moves releases, not drawn sleeps."""
    sc = herdsim.load_scenario({
        "name": "one-key", "duration": "2400s", "bin": "10s",
        "workload": {"arrivals": "constant", "rate": 1e-4, "backlog": 1, "keys": 1,
                     "poison_fraction": 1.0},
        "workers": {"count": 1}, "retry": {"preset": "k8s-workqueue"}},
        {"workers.poll_interval": "100ms"})
    sleeps = herdsim.run(sc).sleeps
    assert sleeps["attempt"].tolist() == list(range(20))
    assert sleeps["sleep"].tolist()[:3] == [0.005, 0.010, 0.020]
    assert sleeps["sleep"].iloc[17] == pytest.approx(655.36)
    assert sleeps["sleep"].iloc[18:].tolist() == [1000.0, 1000.0]


def test_retries_count_failures_per_key_and_a_success_forgets_them():
    """In a keyed run under the preset every recorded sleep is client-go's
    ``MaxOf(ItemExponential(5 ms, 1000 s), Bucket(10/s, 100)).When(key)`` replayed over
    the run: the key's failures so far (whichever job of the key failed), reset by a
    success of any job of the key or a job giving up (Forget), and the shared bucket's
    reservation."""
    spec = keyed(12)
    spec["retry"] = {"preset": "k8s-workqueue", "max_retries": 6}
    res = herdsim.run(herdsim.load_scenario(spec))
    jobs, sleeps = res.jobs, res.sleeps
    key_of = jobs["key"].to_numpy()
    done = jobs[jobs["outcome"].isin(["succeeded", "dead_lettered"])]  # both Forget
    events = sorted([(t, 1, i, int(key_of[job])) for i, (t, job) in
                     enumerate(zip(sleeps["time"], sleeps["job"], strict=True))]
                    + [(t, 0, 0, int(k)) for t, k in zip(done["finish"], done["key"],
                                                         strict=True)])
    items, bucket = ItemExponential(), Bucket()
    attempts, pauses = [], []
    for t, is_sleep, _, key in events:
        if not is_sleep:
            items.forget(key)
            continue
        attempts.append(items.failures.get(key, 0))
        pauses.append(max(items.when(key), bucket.reserve(t)))
    assert len(attempts) == len(sleeps) > 200
    assert attempts == sleeps["attempt"].tolist()
    assert pauses == sleeps["sleep"].tolist()
    per_job = sleeps.groupby("job").cumcount()  # what counting per job would have said
    assert (per_job != sleeps["attempt"]).any()


@pytest.mark.parametrize("mode", ["sleep", "requeue"])
def test_every_job_ends_in_one_place_counted_from_the_saved_jobs_table(mode, tmp_path):
    """jobs_submitted = succeeded + dead-lettered + pending + merged, each counted from
    the rows of the saved jobs.parquet; the merged ones finished after they arrived, and
    jobs only collapse into their own key's."""
    sc = herdsim.load_scenario(keyed(8, workers={"retry_mode": mode}))
    res = herdsim.run(sc)
    out = herdsim.save(res, tmp_path / "run", formats=[])
    jobs = pd.read_parquet(out / "jobs.parquet")
    counts = jobs["outcome"].astype(str).value_counts()
    s = res.summary
    assert counts.get("merged", 0) > 100 and counts.get("dead_lettered", 0) > 0
    assert len(jobs) == s["jobs_submitted"] == res.timeseries["arrivals"].sum()
    assert sum(counts.get(o, 0) for o in ("succeeded", "dead_lettered", "pending",
                                          "merged")) == len(jobs)
    assert (s["jobs_succeeded"], s["jobs_dead_lettered"], s["jobs_pending"],
            s["jobs_merged"]) == tuple(int(counts.get(o, 0)) for o in
                                       ("succeeded", "dead_lettered", "pending", "merged"))
    merged = jobs[jobs["outcome"] == "merged"]
    assert (merged["finish"] >= merged["arrival"]).all()
    assert jobs["key"].between(0, 7).all()


@pytest.mark.parametrize("mode", ["sleep", "requeue"])
def test_with_keys_far_more_than_jobs_in_the_system_the_run_is_the_one_without(mode):
    """With 10^9 keys no two jobs in the system share one, so nothing collapses and the
    run is the run without keys number for number (common random numbers: the keys come
    from a stream of their own; the per-key failure count is then the job's)."""
    plain = herdsim.run(herdsim.load_scenario(keyed(None, workers={"retry_mode": mode})))
    many = herdsim.run(herdsim.load_scenario(keyed(10**9, workers={"retry_mode": mode})))
    assert many.summary["jobs_merged"] == 0 and len(many.sleeps) > 100
    assert many.jobs["key"].nunique() == len(many.jobs)
    pd.testing.assert_frame_equal(plain.timeseries, many.timeseries, check_exact=True)
    pd.testing.assert_frame_equal(plain.sleeps, many.sleeps, check_exact=True)
    jobs = many.jobs.drop(columns="key").astype({"outcome": str})
    pd.testing.assert_frame_equal(plain.jobs.astype({"outcome": str}), jobs, check_exact=True)


def back_to_back(keys: int | None, rate: float = 5000.0) -> herdsim.Result:
    """2 s of arrivals far faster than one key's reconciles (10 ms each, constant): with
    keys, every key always has a job held while one is in process."""
    return herdsim.run(herdsim.load_scenario({
        "name": "b2b", "duration": "2s", "bin": "1ms", "seed": 3,
        "workload": {"rate": rate, **({"keys": keys} if keys else {})},
        "workers": {"count": 20},
        "downstream": {"concurrency": 20,
                       "service": {"distribution": "constant", "mean": "10ms"}}}))


def test_one_key_is_one_reconcile_at_a_time_back_to_back():
    """One key: never two calls in flight (sampled every 1 ms), and the calls are
    back to back from the first arrival t1: ⌊(2 − t1) / 10 ms⌋ + 1 of them (± 1 for the
    float sums at the run's end), against the pool's 2,000 a second without keys."""
    one = back_to_back(1)
    assert one.timeseries["in_flight"].max() == 1
    t1 = one.jobs["arrival"].min()
    predicted = math.floor((2.0 - t1) / 0.01) + 1
    assert abs(one.summary["attempts_total"] - predicted) <= 1
    without = back_to_back(None)
    assert without.timeseries["in_flight"].max() > 1
    assert without.summary["attempts_total"] > 3900  # 20 workers: 2,000 calls/s


def test_n_keys_collapse_the_calls_to_n_reconcile_loops():
    """Five keys and 20 workers: each key runs its own back-to-back loop from its first
    job, so the calls are Σ_k ⌊(2 − t1_k) / 10 ms⌋ + 1 (± 1 a key), at most five in flight."""
    res = back_to_back(5)
    firsts = res.jobs.groupby("key")["arrival"].min()
    predicted = sum(math.floor((2.0 - t) / 0.01) + 1 for t in firsts)
    assert abs(res.summary["attempts_total"] - predicted) <= 5
    assert res.timeseries["in_flight"].max() == 5
    s = res.summary
    assert s["jobs_merged"] + s["jobs_succeeded"] + s["jobs_pending"] == s["jobs_submitted"]


def test_skewed_keys_follow_their_weights():
    """key_skew s: key i with probability (i+1)^-s / Σ; uniform at 0. A chi-square test on
    20,000 draws of the run's key stream (seed fixed, 9 degrees of freedom: the 0.999
    quantile is 27.9)."""
    from herdsim.config.sections import Workload
    from herdsim.model.streams import generators
    from herdsim.model.workload import key_draws

    for skew in (0.0, 1.2):
        draw = key_draws(Workload(rate=1, keys=10, key_skew=skew), generators(5)["keys"])
        counts = np.bincount([draw() for _ in range(20_000)], minlength=10)
        weights = np.arange(1, 11, dtype=float) ** -skew
        expected = 20_000 * weights / weights.sum()
        assert ((counts - expected) ** 2 / expected).sum() < 27.9


@pytest.mark.parametrize(("changes", "field"), [
    ({"workers": {"count": None}}, "workload.keys"),
    ({"downstream": {"model": "occ"}}, "workload.keys"),
    ({"workload": {"keys": None, "key_skew": 1.0}}, "workload.key_skew"),
    ({"workload": {"keys": 0}}, "workload.keys"),
])
def test_keys_where_they_cannot_apply_are_one_line_errors(changes, field):
    spec = keyed(4)
    for section, fields in changes.items():
        spec[section] = {**spec.get(section, {}), **fields}
    with pytest.raises(herdsim.ScenarioError) as error:
        herdsim.load_scenario(spec)
    assert field in str(error.value) and "\n" not in str(error.value)


def test_the_testbed_refuses_keys_rather_than_ignore_them():
    """Its Redis queue has no dedup: a keyed scenario is refused in one line naming the
    field, not run as if it had no keys."""
    from herdsim.errors import TestbedError
    from herdsim.testbed.run import check_supported

    with pytest.raises(TestbedError, match="workload.keys"):
        check_supported(herdsim.load_scenario(keyed(4)))


@pytest.mark.parametrize("strategy", ["decorrelated_jitter", "decorrelated_jitter_v2"])
def test_a_stateful_strategy_remembers_per_key_as_it_counts(strategy):
    """A stateful strategy's memory follows the key's failure count: when a job giving up
    forgets the key, the next failure starts afresh, so no sleep is drawn from one job's
    history at another's index. (Found by the conservation property: Polly's V2 slept
    -2,804 s here when the memory stayed with the job.)"""
    sc = herdsim.load_scenario({
        "name": "prop", "seed": 0, "duration": 4.0, "bin": 0.05,
        "workload": {"arrivals": "constant", "rate": 1.0, "poison_fraction": 0.1, "keys": 1,
                     "spikes": [{"at": 0.0, "duration": 3.0, "rate": 6.0}]},
        "workers": {"count": 1, "retry_mode": "requeue"},
        "downstream": {"concurrency": 1, "service": {"distribution": "constant",
                                                     "mean": 0.125},
                       "outages": [{"start": 0.0, "duration": 4.0, "mode": "down"}]},
        "retry": {"strategy": strategy, "base": 0.5, "cap": 0.5, "max_retries": None,
                  "poison_retryable": False, "throttling": []},
        "dlq": {"enabled": False, "redelivery_delay": 1.0}})
    sleeps = herdsim.run(sc).sleeps["sleep"]
    assert len(sleeps) > 10 and sleeps.between(0, 0.5).all(), sleeps.describe()

"""Autoscaling workers: KEDA's and the HPA's formulas, and a pool that grows and shrinks
without losing a job."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import herdsim
from herdsim.errors import ScenarioError
from herdsim.policies.autoscale import Autoscaler, BusyFraction, QueueDepth


def test_keda_asks_for_one_worker_per_target_jobs_queued():
    """KEDA hands the HPA an AverageValue target: ceil(queue length / target)."""
    scaler = Autoscaler(QueueDepth(metric="queue_depth", target=10, max=1000))
    assert [scaler.desired(5, depth, 0.0) for depth in (0, 1, 10, 95, 100, 101)] == \
        [0, 1, 1, 10, 10, 11]


def test_hpa_scales_by_the_ratio_of_utilisation_to_target():
    """The HPA's ceil(current × utilisation / target): the docs' example of 200m used
    against 100m target doubles the replicas; 0.7 of 10 at target 0.7 keeps 10."""
    scaler = Autoscaler(BusyFraction(metric="busy_fraction", target=0.5, max=1000))
    assert scaler.desired(3, 0, 1.0) == 6
    assert scaler.desired(3, 0, 0.9) == 6  # ceil(5.4)
    assert Autoscaler(BusyFraction(metric="busy_fraction", target=0.7, max=99)).desired(
        10, 0, 0.7) == 10


@given(st.integers(1, 50), st.integers(0, 100), st.integers(0, 5000), st.floats(0, 1),
       st.one_of(st.none(), st.integers(1, 20)), st.sampled_from([0, 0.5, 5, 60]),
       st.floats(0, 200))
def test_a_decision_respects_min_max_step_and_cooldown(lo, extra, depth, busy, step,
                                                       cooldown, now):
    cfg = QueueDepth(metric="queue_depth", target=3, min=lo, max=lo + extra,
                    step_limit=step, cooldown=cooldown)
    scaler = Autoscaler(cfg)
    current = lo + extra // 2
    first = scaler.decide(now, current, depth, busy)
    assert cfg.min <= first <= cfg.max
    if step is not None:
        assert abs(first - current) <= step
    wish = max(cfg.min, min(cfg.max, math.ceil(depth / 3 - 1e-9)))
    assert (first - current) * (wish - current) >= 0  # never the wrong way
    if first != current:  # a change: no scale-in within the cooldown
        assert scaler.decide(now + cooldown / 2, first, 0, 0.0) >= first or cooldown == 0


def _scaled(**autoscale) -> dict:
    return {"name": "scaled", "duration": "40s", "seed": 4, "bin": "500ms",
            "workload": {"rate": 40},
            "workers": {"count": 50, "autoscale": {"metric": "queue_depth", "target": 1000,
                                                   "min": 1, "max": 50, "interval": "1s",
                                                   **autoscale}},
            "downstream": {"concurrency": 100, "service": {"mean": "20ms"},
                           "outages": [{"start": "0s", "duration": "3s"}]},
            "retry": {"strategy": "exponential", "base": "500ms", "max_retries": None}}


def test_a_worker_scaled_in_finishes_its_job_first():
    """Some 40 of 50 workers hold a job retrying through a 3 s outage when the autoscaler
    asks for 1 at t = 1 s: the idle ones leave at once, the busy ones only once their job
    has succeeded (after the outage), so every job succeeds and none is lost."""
    res = herdsim.run(herdsim.load_scenario(_scaled()))
    jobs, ts = res.jobs, res.timeseries
    held = int((jobs["arrival"] < 1.0).sum())  # each one taken by a worker of its own
    assert held >= 20
    early = jobs[jobs["arrival"] < 30]
    assert (early["outcome"] == "succeeded").all()
    assert (jobs.loc[jobs["arrival"] < 1.0, "finish"] > 3.0).all()  # held through it
    at = ts.set_index("time")["workers"]
    assert at[0.0] == 50 and at[1.5] == held and at[2.5] == held and at[10.0] == 1
    assert ts["workers"].is_monotonic_decreasing


def test_the_pool_follows_the_queue_between_min_and_max():
    """A pool of 1 at 40 jobs/s and a 3 s outage: the queue grows, so does the pool (20
    at most per decision), every value within min..max and changing only at the
    decisions (every second); every job is counted once."""
    sc = herdsim.load_scenario(_scaled(target=5, min=1, max=30, step_limit=20),
                               overrides={"workers.count": 1})
    res = herdsim.run(sc)
    ts = res.timeseries
    workers = ts["workers"].to_numpy()
    assert workers.min() >= 1 and 10 < workers.max() <= 30
    changes = ts["time"].to_numpy()[1:][np.diff(workers) > 0]  # (busy ones leave later)
    assert np.all(np.isclose(changes % 1.0, 0.0) | np.isclose(changes % 1.0, 1.0))
    assert np.abs(np.diff(workers)).max() <= 20
    assert ts["arrivals"].sum() == len(res.jobs)


def test_without_autoscale_there_is_no_workers_column():
    sc = herdsim.load_scenario(_scaled(), overrides={"workers.autoscale": None})
    assert "workers" not in herdsim.run(sc).timeseries


@pytest.mark.parametrize("overrides, field", [
    ({"workers.count": 60}, "workers.count"),
    ({"workers.autoscale.min": 60}, "workers.autoscale.min"),
    ({"workers.autoscale.metric": "busy_fraction", "workers.autoscale.target": 2},
     "workers.autoscale.target"),
    ({"workers.count": None}, "workers.autoscale"),
])
def test_bad_autoscale_settings_name_the_field(overrides, field):
    with pytest.raises(ScenarioError) as err:
        herdsim.load_scenario(_scaled(), overrides=overrides)
    assert f"{field}:" in str(err.value)


@pytest.mark.slow
def test_bundled_scale_out_turns_a_blip_metastable(scenarios_dir):
    """The bundled scenario's story, cut to 40 s: with the autoscaler the 3 s slowdown
    never ends (the herd it built keeps the downstream down); with a fixed pool, or a
    max of 600, the system recovers."""
    path = scenarios_dir / "autoscale.yaml"
    states = {}
    for label, overrides in (("scaled", {}), ("fixed", {"workers.autoscale": None}),
                             ("capped", {"workers.autoscale.max": 600})):
        sc = herdsim.load_scenario(path, overrides={"duration": "40s", **overrides})
        states[label] = herdsim.run(sc).summary["state"]
    assert states == {"scaled": "metastable", "fixed": "recovered", "capped": "recovered"}


def test_sqs_lambda_scales_300_a_minute_and_dead_letters_after_5_receives():
    """The preset's documented constants in a run: 5 concurrent batches at first, at most
    5 more a second (300 a minute) and never above 1,000; a failing message comes back
    after the 30 s visibility timeout and goes to the DLQ on its 5th receive."""
    sc = herdsim.load_scenario({
        "name": "sqs", "duration": "150s", "seed": 5, "bin": "1s",
        "workload": {"rate": 60, "poison_fraction": 0.02},
        "retry": {"preset": "sqs-lambda"},
        "downstream": {"concurrency": 1000, "service": {"distribution": "constant",
                                                        "mean": "1s"}}})
    res = herdsim.run(sc)
    ts, jobs = res.timeseries, res.jobs
    workers = ts["workers"].to_numpy()
    assert workers[0] == 5 and workers.max() <= 1000
    assert np.all(np.diff(workers) <= 5)  # bins of 1 s, one decision each
    assert workers.max() >= 60  # it did reach the load (60 jobs/s of 1 s)
    poison = jobs[jobs["poison"] & (jobs["arrival"] < 20)]
    assert len(poison) > 5
    assert (poison["outcome"] == "dead_lettered").all() and (poison["attempts"] == 5).all()
    sleeps = res.sleeps[res.sleeps["job"].isin(poison["job"])]
    assert (sleeps["sleep"] == 30.0).all() and len(sleeps) == 4 * len(poison)
    assert (poison["latency"] >= 4 * 30.0).all()

"""herdsim against Metafor's own simulator on Metafor's README example (the numbers of
its runs: herdsim/experiments/metafor-reference.json, made by benchmarks/metafor.py).

The interval: where the mean of 5 herdsim runs falls 99% of the time were herdsim's runs
drawn like Metafor's, the two-sample t interval around Metafor's mean over its 10 runs,
mean ± t(0.995, 9) · s · sqrt(1/10 + 1/5), s the spread of Metafor's runs (each run's
figure is an average over 10,000 s, close to normal). A correct model fails a figure 1%
of the time; the range of Metafor's runs would fail it about 3% of the time (the mean of
5 normal draws leaves the range of 10 so often) and would not say so. The interval is
narrow beside the effect in question: without late answers herdsim makes 6% more
retries, over four of its half-widths above its top.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from herdsim.experiments import metafor

SEEDS = range(5)


def interval(metric: str, herdsim_runs: int = 5) -> tuple[float, float]:
    """The 99% interval of a mean of *herdsim_runs* runs drawn like Metafor's."""
    values = np.array([run[metric] for run in metafor.reference()["runs"]])
    n = len(values)
    half = stats.t.ppf(0.995, n - 1) * values.std(ddof=1) * np.sqrt(1 / n + 1 / herdsim_runs)
    return values.mean() - half, values.mean() + half


def test_the_reference_says_where_it_comes_from():
    ref = metafor.reference()
    assert ref["commit"] == "5355c17f625fc5c1b2982c00706168eb8381b7f1"
    assert "if offered:" in ref["changed"]
    assert len(ref["runs"]) >= 5
    assert {run["horizon"] for run in ref["runs"]} == {10000.0}
    assert {run["seed"] for run in ref["runs"]} == set(range(len(ref["runs"])))


@pytest.fixture(scope="module")
def herdsim_runs() -> dict[bool, list[dict]]:
    horizon = metafor.reference()["runs"][0]["horizon"]
    return {late: [metafor.run(seed, horizon, late) for seed in SEEDS]
            for late in (False, True)}


def mean(runs: list[dict], metric: str) -> float:
    return sum(run[metric] for run in runs) / len(runs)


@pytest.mark.slow
@pytest.mark.parametrize("metric", metafor.METRICS)
def test_with_late_answers_herdsim_is_inside_metafors_runs(herdsim_runs, metric):
    low, high = interval(metric)
    assert low <= mean(herdsim_runs[True], metric) <= high


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["p_full", "retries_per_s", "refusals_per_s"])
def test_without_late_answers_herdsim_retries_and_refuses_more(herdsim_runs, metric):
    """The gap the late answers close: above the interval."""
    assert mean(herdsim_runs[False], metric) > interval(metric)[1]


@pytest.mark.parametrize("room", [98, 100])
def test_the_ctmcs_count_is_the_waiting_room_and_the_one_in_service(room):
    """The CTMC's queue (``system_*``) counts the job in service beside the waiting room:
    on the same samples its mean exceeds the room's by the busy share, at most one (one
    thread), and from a full start (room + 1 calls at t = 0) neither drains in 300 s."""
    run = metafor.run(1, 300.0, True, room=room, backlog=room + 1)
    assert 0 < run["system_mean_n"] - run["mean_n"] <= 1
    assert run["system_p_full"] <= run["p_full"]  # full with one in service: room full
    assert 0 < run["system_p_full"] < 1 and run["drain"] is None


def test_a_run_started_empty_is_empty_at_once_and_the_default_client_retries_refusals():
    """From an empty start the system is found empty within a minute (at 0.1 s no call
    has come with chance e^-0.95 = 0.39, and a queue of a few empties within seconds at
    load 0.95); with herdsim's default client
    a call refused at the full room is retried, so it retries more than Metafor's."""
    empty = metafor.run(2, 200.0, True, backlog=0)
    assert empty["drain"] is not None and empty["drain"] < 60
    full = {only: metafor.run(2, 300.0, False, only_timeouts=only, backlog=metafor.ROOM + 1)
            for only in (True, False)}
    assert full[False]["retries_per_s"] > full[True]["retries_per_s"]

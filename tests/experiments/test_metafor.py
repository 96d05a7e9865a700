"""herdsim against Metafor's own simulator on Metafor's README example (the numbers of
its runs: herdsim/experiments/metafor-reference.json, made by benchmarks/metafor.py).

The interval: the range (min to max) of Metafor's 10 runs. herdsim's figure is the mean
of its 5 runs, whose spread is a fifth of one run's variance: were the two simulators
the same, that mean would fall outside the range of 10 runs well under 1% of the time
(the expected range of 10 normal draws is about ±1.5 σ; the mean's σ is 0.45 σ). The
range is narrow beside the effects in question: without late answers herdsim makes 6%
more retries, about 4 range-widths above Metafor's largest run.
"""

from __future__ import annotations

import pytest

from herdsim.experiments import metafor

SEEDS = range(5)


def reference_range(metric: str) -> tuple[float, float]:
    values = [run[metric] for run in metafor.reference()["runs"]]
    return min(values), max(values)


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
    low, high = reference_range(metric)
    assert low <= mean(herdsim_runs[True], metric) <= high


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["p_full", "retries_per_s", "refusals_per_s"])
def test_without_late_answers_herdsim_retries_and_refuses_more(herdsim_runs, metric):
    """The gap the late answers close: above Metafor's largest run."""
    assert mean(herdsim_runs[False], metric) > reference_range(metric)[1]

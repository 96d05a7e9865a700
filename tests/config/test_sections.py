"""The ``breaker`` and ``budget`` sections, open-loop callers and the overload knobs:
bad values are rejected naming the field; any valid mix of them still accounts for
every job (recounted from the simulation's own containers, not from the summary)."""

from __future__ import annotations

import typing
from pathlib import Path

import annotated_types as at
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config import graph, schema
from herdsim.config.scenario import Scenario
from herdsim.model.simulation import Simulation
from herdsim.policies import balancers
from herdsim.policies import fields as fields_
from herdsim.policies.fields import LIMIT
from herdsim.results.result import Result


def problems(data) -> list[tuple[str, str]]:
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(data)
    return info.value.problems


BREAKER = {"enabled": True}


@pytest.mark.parametrize(("section", "changes", "field"), [
    ("breaker", {"failure_rate_threshold": 1.5}, "breaker.failure_rate_threshold"),
    ("breaker", {"failure_rate_threshold": -0.1}, "breaker.failure_rate_threshold"),
    ("breaker", {"failure_rate_threshold": 0}, "breaker.failure_rate_threshold"),
    ("breaker", {"slow_call_rate_threshold": 2}, "breaker.slow_call_rate_threshold"),
    ("breaker", {"window": "-5s"}, "breaker.window"),
    ("breaker", {"window": "0s"}, "breaker.window"),
    ("breaker", {"window_calls": 0}, "breaker.window_calls"),
    ("breaker", {"minimum_calls": 0}, "breaker.minimum_calls"),
    ("breaker", {"open_duration": "-1s"}, "breaker.open_duration"),
    ("breaker", {"open_duration_multiplier": 0.5}, "breaker.open_duration_multiplier"),
    ("breaker", {"max_open_duration": "-2s"}, "breaker.max_open_duration"),
    ("breaker", {"half_open_calls": 0}, "breaker.half_open_calls"),
    ("breaker", {"slow_call_threshold": "0ms"}, "breaker.slow_call_threshold"),
    ("breaker", {"scope": "cluster"}, "breaker.scope"),
    ("budget", {"kind": "token_bucket", "capacity": 0, "preset": "aws"}, "budget.capacity"),
    ("budget", {"kind": "token_bucket", "capacity": -5, "preset": "aws"}, "budget.capacity"),
    ("budget", {"kind": "token_bucket", "preset": "azure"}, "budget.preset"),
    ("budget", {"kind": "token_bucket", "preset": "aws", "floor": 1.0}, "budget.floor"),
    ("budget", {"kind": "token_bucket", "preset": "aws", "retry_cost": -1},
     "budget.retry_cost"),
    ("budget", {"kind": "adaptive", "window": "-1s"}, "budget.window"),
    ("budget", {"kind": "adaptive", "k": 0}, "budget.k"),
    ("budget", {"kind": "ratio", "ratio": 1.5}, "budget.ratio"),
    ("budget", {"kind": "ratio", "min_per_second": -1}, "budget.min_per_second"),
    ("budget", {"kind": "leaky"}, "budget.kind"),
    ("budget", {"scope": "pool"}, "budget.kind"),
])
def test_out_of_range_mitigation_fields_are_rejected_naming_the_field(
        make_scenario, section, changes, field):
    base = BREAKER if section == "breaker" else {}
    [(got, message)] = problems(make_scenario(**{section: {**base, **changes}}))
    assert got == field and message


def test_a_token_bucket_with_neither_preset_nor_capacity_names_what_is_missing(
        make_scenario):
    [(field, message)] = problems(make_scenario(budget={"kind": "token_bucket"}))
    assert field == "budget.capacity"
    assert "preset" in message and "aws" in message


def test_a_token_bucket_without_a_preset_needs_every_token_field(make_scenario):
    [(field, _)] = problems(make_scenario(budget={"kind": "token_bucket", "capacity": 50}))
    assert field == "budget.retry_cost"


@pytest.mark.parametrize(("changes", "field"), [
    ({"breaker": {"enabled": True, "scope": "worker"}}, "breaker.scope"),
    ({"budget": {"kind": "adaptive", "scope": "worker"}}, "budget.scope"),
    ({"workers": {"count": None, "retry_mode": "requeue"}}, "workers.retry_mode"),
])
def test_per_worker_state_and_requeue_are_rejected_for_open_loop_callers(make_scenario,
                                                                         changes, field):
    data = make_scenario(**changes)
    data["workers"] = {**data["workers"], "count": None}
    [(got, message)] = problems(data)
    assert got == field and "open-loop" in message


def test_a_disabled_worker_scope_breaker_is_fine_in_open_loop(make_scenario):
    """The default ``breaker`` section (off, scope worker) must not block open loop."""
    assert herdsim.load_scenario(make_scenario(workers={"count": None})).workers.count is None


@pytest.mark.parametrize(("downstream", "field"), [
    ({"overload": {"latency_per_call": "-1ms"}}, "downstream.overload.latency_per_call"),
    ({"overload": {"collapse": {"window": "100ms"}}}, "downstream.overload.collapse"),
    ({"overload": {"collapse": {"threshold": 0}}}, "downstream.overload.collapse.threshold"),
    ({"overload": {"collapse": {"load_limit": 10, "restart_time": "0s"}}},
     "downstream.overload.collapse.restart_time"),
    ({"network_delay": {"mean": "0ms"}}, "downstream.network_delay.mean"),
    ({"queue_limit": -1}, "downstream.queue_limit"),
])
def test_bad_overload_knobs_are_rejected_naming_the_field(make_scenario, downstream, field):
    [(got, message)] = problems(make_scenario(downstream=downstream))
    assert got == field and message


def test_the_cli_rejects_a_bad_breaker_in_one_line_with_exit_2(tmp_path, make_scenario):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(make_scenario(
        breaker={"enabled": True, "failure_rate_threshold": 1.5})))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert f"{path}: breaker.failure_rate_threshold" in " ".join(result.output.split())
    assert not out.exists()


def test_the_cli_rejects_a_bad_override_of_a_budget(tmp_path, make_scenario):
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(make_scenario(budget={"kind": "ratio"})))
    result = CliRunner().invoke(app, ["validate", str(path), "--set", "budget.ratio=2"])
    assert result.exit_code == 2
    assert "budget.ratio" in result.output and "Traceback" not in result.output


# -- conservation with every mitigation ------------------------------------------------------


@st.composite
def mitigated(draw) -> dict:
    """A small scenario (3 s, <= 30 workers) with an outage, a breaker and/or a budget,
    open or closed loop, either retry mode, DLQ on or off."""
    open_loop = draw(st.booleans())
    mode = "sleep" if open_loop else draw(st.sampled_from(["sleep", "requeue"]))
    data = {
        "name": "mix", "seed": draw(st.integers(0, 1000)), "duration": "3s",
        "workload": {"rate": draw(st.floats(20, 300)), "poison_fraction": draw(
            st.sampled_from([0.0, 0.1]))},
        "workers": {"count": None if open_loop else draw(st.integers(1, 30)),
                    "retry_mode": mode, "poll_interval": "50ms"},
        "downstream": {
            "concurrency": draw(st.integers(1, 20)), "queue_limit": draw(
                st.sampled_from([None, 0, 10])),
            "service": {"mean": "20ms"},
            "timeout": draw(st.sampled_from([None, "30ms"])),
            "outages": [{"start": draw(st.floats(0, 1.5)), "duration": draw(
                st.floats(0.1, 1.4)), "mode": draw(st.sampled_from(["down", "error"]))}],
            "overload": {"latency_per_call": draw(st.sampled_from([0, "1ms"]))},
        },
        "retry": {"strategy": draw(st.sampled_from(["fixed", "full_jitter"])),
                  "base": "20ms", "cap": "200ms",
                  "max_retries": draw(st.sampled_from([None, 0, 3]))},
        "dlq": {"enabled": open_loop or draw(st.booleans()), "redelivery_delay": "100ms"},
    }
    if draw(st.booleans()):
        data["breaker"] = {
            "enabled": True,
            "scope": "pool" if open_loop else draw(st.sampled_from(["pool", "worker"])),
            "retries_only": draw(st.booleans()), "window": "500ms", "minimum_calls": 3,
            "window_calls": draw(st.sampled_from([None, 5])), "open_duration": "200ms",
            "half_open_calls": draw(st.integers(1, 3))}
    kind = draw(st.sampled_from([None, "token_bucket", "adaptive", "ratio"]))
    if kind is not None:
        data["budget"] = {"kind": kind,
                          "scope": "pool" if open_loop else draw(st.sampled_from(
                              ["pool", "worker"]))}
        if kind == "token_bucket":
            data["budget"]["preset"] = draw(st.sampled_from(["aws", "aws-1.43", "grpc"]))
            data["budget"]["capacity"] = draw(st.sampled_from([10, 50]))
        else:  # a token bucket has no window
            data["budget"]["window"] = "1s"
    return data


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mitigated())
def test_every_job_ends_in_exactly_one_place_with_breakers_budgets_and_open_loop(data):
    """Recount from the simulation itself: finished ids are unique; the jobs still held
    (main queue, delayed queue, workers' or callers' hands) are unique and disjoint from
    the finished ones; together they are every submitted job."""
    sim = Simulation(herdsim.load_scenario(data))
    run = sim.run()
    finished = np.asarray(sim.recorder.finish_id, dtype=np.int64).copy()  # the frame takes them
    result = Result.from_finished(run)
    held = np.asarray([job.id for job in sim.pending_jobs()], dtype=np.int64)
    assert len(np.unique(finished)) == len(finished)
    assert len(np.unique(held)) == len(held)
    assert not np.intersect1d(finished, held).size
    submitted = len(sim.recorder.arrivals)
    assert sorted([*finished, *held]) == list(range(submitted))
    s = result.summary
    assert s["jobs_submitted"] == submitted
    assert s["jobs_pending"] == len(held)
    ts = result.timeseries
    assert ts["success"].sum() == s["jobs_succeeded"]
    assert ts["failed_dlq"].sum() == s["jobs_dead_lettered"]
    assert ts["short_circuited"].sum() == s["calls_avoided"]
    assert ts["budget_refused"].sum() == s["budget_refused_total"]
    assert ts["breaker_open"].between(0, 1).all()


# -- the bundled mitigation scenarios -------------------------------------------------------


def test_the_mitigation_scenarios_set_what_their_comments_say(scenarios_dir):
    breaker = herdsim.load_scenario(scenarios_dir / "breaker.yaml").breaker
    assert breaker.enabled and breaker.scope == "pool"
    budget = herdsim.load_scenario(scenarios_dir / "budget.yaml").budget
    assert (budget.kind, budget.preset, budget.scope) == ("token_bucket", "aws", "pool")
    assert herdsim.load_scenario(scenarios_dir / "open_loop.yaml").workers.count is None
    metastable = herdsim.load_scenario(scenarios_dir / "metastable.yaml")
    assert metastable.budget is None and not metastable.breaker.enabled


@pytest.mark.slow
def test_metastable_stays_down_without_a_budget_and_recovers_with_one(scenarios_dir):
    """The scenario's claim, at 40 s: after the 2 s slowdown (over at t = 12 s) the run
    never becomes healthy again (goodput stays ~0, recovery_time null); with the AWS
    quota it does, and the quota is what refused the retries."""
    path = scenarios_dir / "metastable.yaml"
    down = herdsim.run(herdsim.load_scenario(path, {"duration": "40s"}))
    ts = down.timeseries
    assert down.summary["recovery_time"] is None
    assert ts.loc[ts["time"] >= 30, "success"].sum() < 0.05 * 700 * 10
    cured = herdsim.run(herdsim.load_scenario(path, {
        "duration": "40s", "budget.kind": "token_bucket", "budget.preset": "aws"}))
    assert cured.summary["recovery_time"] is not None
    assert cured.summary["budget_refused_total"] > 0


# -- bounds (issue 36: every count has an upper bound a user could mean) -------------------

def _upper(info) -> float | None:
    """The field's own upper bound (``le``/``lt``), or None."""
    return next((m.le if isinstance(m, at.Le) else m.lt for m in info.metadata
                 if isinstance(m, (at.Le, at.Lt))), None)


def test_every_count_is_bounded_and_the_multipliers_below_the_global_limit():
    """The schema walker lists every field: each whole-number field but the seed is
    bounded (its own bound or the global 1e9), and each count the cost estimate
    multiplies by has a bound of its own, stated in docs/scenarios.md's Bounds table."""
    fields = dict(schema.fields(Scenario))
    for path, info in fields.items():
        if int in (typing.get_args(info.annotation) or (info.annotation,)) and path != "seed":
            assert (_upper(info) or LIMIT) <= LIMIT, path
    multipliers = {
        "workers.count": fields_.MAX_WORKERS, "workers.clients": fields_.MAX_WORKERS,
        "workers.autoscale.max": fields_.MAX_WORKERS, "workload.backlog":
        fields_.MAX_BACKLOG, "retry.max_retries": fields_.MAX_RETRIES,
        "downstream.calls.retry.max_retries": fields_.MAX_RETRIES,
        "downstream.concurrency": fields_.MAX_WORKERS,
        "downstream.calls.count": graph.MAX_COUNT, "hedging.max_attempts": 100,
        "downstream.calls.hedging.max_attempts": 100,
        "downstream.replicas": balancers.MAX_REPLICAS}
    docs = (Path(__file__).parents[2] / "docs" / "scenarios.md").read_text()
    table = docs[docs.index("<!-- bounds -->"):docs.index("<!-- /bounds -->")]
    for path, bound in multipliers.items():
        assert _upper(fields[path]) == bound < LIMIT, path
        name = path.split(".")[-1]
        rows = [row for row in table.splitlines() if f"{name}`" in row or f".{name}" in row]
        assert any(f"| {bound:,} |" in row for row in rows), (path, rows)

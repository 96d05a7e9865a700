"""Scenario validation: what a user may write, and the errors they get when they slip."""

from __future__ import annotations

import pytest

import herdsim


def problems(data, overrides=None) -> list[tuple[str, str]]:
    """The (field, message) pairs a bad scenario raises."""
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(data, overrides)
    return info.value.problems


def fields(data, overrides=None) -> list[str]:
    return [field for field, _ in problems(data, overrides)]


@pytest.mark.parametrize(("written", "seconds"), [
    ("250ms", 0.25), ("10s", 10.0), ("2m", 120.0), (1.5, 1.5), (3, 3.0), ("1.5", 1.5),
    ("1h", 3600.0), ("500us", 0.0005),
])
def test_durations_read_as_seconds(make_scenario, written, seconds):
    sc = herdsim.load_scenario(make_scenario(duration="2h", retry={"base": written,
                                                                   "cap": "2h"}))
    assert sc.retry.base == pytest.approx(seconds)


@pytest.mark.parametrize("written", ["1.5x", "ten seconds", "", True, "-", "5 sec"])
def test_malformed_durations_are_rejected_naming_the_field(make_scenario, written):
    assert fields(make_scenario(retry={"cap": written})) == ["retry.cap"]


def test_a_malformed_duration_is_reported_once(make_scenario):
    """The message quotes the bad value once, not twice ("... got '1.5x' (got '1.5x')")."""
    [(field, message)] = problems(make_scenario(duration="1.5x"))
    assert field == "duration"
    assert message.count("1.5x") == 1, message


@pytest.mark.parametrize(("changes", "field", "suggestion"), [
    ({"retri": {}}, "retri", "retry"),
    ({"workload": {"rate": 5, "poison_fraktion": 0.1}}, "workload.poison_fraktion",
     "poison_fraction"),
    ({"downstream": {"concurency": 3}}, "downstream.concurency", "concurrency"),
    ({"downstream": {"outages": [{"start": 0, "duration": 1, "mod": "down"}]}},
     "downstream.outages.0.mod", "mode"),
])
def test_unknown_fields_suggest_the_closest_name(make_scenario, changes, field, suggestion):
    [(got_field, message)] = problems(make_scenario(**changes))
    assert got_field == field
    assert "unknown field" in message and f"did you mean {suggestion!r}" in message


@pytest.mark.parametrize(("changes", "field"), [
    ({"workers": {"count": -3}}, "workers.count"),
    ({"workers": {"count": 0}}, "workers.count"),
    ({"workload": {"rate": 5, "backlog": -1}}, "workload.backlog"),
    ({"downstream": {"concurrency": -1}}, "downstream.concurrency"),
    ({"downstream": {"queue_limit": -1}}, "downstream.queue_limit"),
    ({"retry": {"max_retries": -1}}, "retry.max_retries"),
    ({"workload": {"rate": 0}}, "workload.rate"),
    ({"workload": {"rate": -5}}, "workload.rate"),
    ({"retry": {"base": "0ms"}}, "retry.base"),
    ({"workload": {"rate": 5, "poison_fraction": 1.5}}, "workload.poison_fraction"),
])
def test_out_of_range_numbers_are_rejected_naming_the_field(make_scenario, changes, field):
    [(got_field, message)] = problems(make_scenario(**changes))
    assert got_field == field and message


def test_an_outage_past_the_end_is_rejected(make_scenario):
    [(field, message)] = problems(make_scenario(
        downstream={"outages": [{"start": "1s", "duration": "2s"}]}))
    assert field.startswith("downstream.outages.0")
    assert "3s" in message and "2s" in message


@pytest.mark.parametrize("length", ["450ms", "500ms"])
def test_an_outage_may_end_with_the_run(make_scenario, length):
    """An outage ending inside the last bin (or exactly at the end) is valid, and the run
    still produces its summary; recovery cannot be observed, so it is not a number > 0.5 s."""
    sc = herdsim.load_scenario(make_scenario(
        duration="2s", workload={"arrivals": "constant", "rate": 50},
        downstream={"outages": [{"start": "1.5s", "duration": length, "mode": "slow",
                                 "factor": 1.0}]}))
    summary = herdsim.run(sc).summary
    assert summary["recovery_time"] is None or summary["recovery_time"] <= 0.5


def test_a_blackhole_needs_a_client_timeout(make_scenario):
    outage = {"start": "1s", "duration": "500ms", "mode": "blackhole"}
    assert fields(make_scenario(downstream={"outages": [outage]})) == [
        "downstream.outages.0.mode"]
    sc = herdsim.load_scenario(make_scenario(downstream={"outages": [outage], "timeout": "1s"}))
    assert sc.downstream.outages[0].mode == "blackhole"


def test_cap_below_base_is_rejected(make_scenario):
    [(field, message)] = problems(make_scenario(retry={"base": "2s", "cap": "1s"}))
    assert field == "retry.cap" and "below base" in message


def test_a_missing_required_field_is_named(make_scenario):
    data = make_scenario()
    del data["workload"]["rate"]
    assert fields(data) == ["workload.rate"]


def test_every_problem_is_reported_at_once(make_scenario):
    data = make_scenario(workers={"count": -1}, workload={"rate": 0})
    assert set(fields(data)) == {"workers.count", "workload.rate"}


def test_errors_from_a_file_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nduration: 2s\nworkload:\n  rate: 0\n")
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(path)
    assert str(info.value).startswith(f"{path}: workload.rate:")


def test_yaml_syntax_errors_give_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nworkload:\n  rate: [1, 2\n")
    with pytest.raises(herdsim.ScenarioError) as info:
        herdsim.load_scenario(path)
    assert str(path) in str(info.value) and "line" in str(info.value)


# -- overrides --------------------------------------------------------------------------------


def test_overrides_reach_list_items_and_parse_like_yaml(make_scenario):
    data = make_scenario(downstream={"outages": [{"start": "1s", "duration": "200ms"}]})
    sc = herdsim.load_scenario(data, {
        "downstream.outages.0.duration": "300ms",
        "retry.max_retries": "null",
        "downstream.serve_abandoned": "true",
        "workers.count": "7",
        "retry.strategy": "full_jitter",
    })
    assert sc.downstream.outages[0].duration == pytest.approx(0.3)
    assert sc.retry.max_retries is None
    assert sc.downstream.serve_abandoned is True
    assert sc.workers.count == 7
    assert sc.retry.strategy == "full_jitter"
    assert data["downstream"]["outages"][0]["duration"] == "200ms"  # the input is untouched


def test_a_strategy_set_over_a_preset_does_without_the_presets_params(make_scenario):
    """grpc-retry's ``jitter`` is its strategy's param: ``--set retry.strategy=...`` (and
    each arm of ``compare --strategies``) refused it as the new strategy's, though the
    user never wrote it (the census's preset scenario under compare). Params the user
    wrote stay, and the preset's own strategy keeps its params."""
    from herdsim.experiments.compare import build_arms
    from herdsim.policies import presets

    data = make_scenario(retry={"preset": "grpc-retry"})
    data["retry"].pop("strategy", None)  # the preset's
    own = presets.get("grpc-retry").fields
    assert own["retry.params"]  # else there is nothing to drop
    sc = herdsim.load_scenario(data, {"retry.strategy": "exponential"})
    assert (sc.retry.strategy, sc.retry.params) == ("exponential", {})
    same = herdsim.load_scenario(data, {"retry.strategy": own["retry.strategy"]})
    assert same.retry.params == own["retry.params"]
    arms = build_arms(herdsim.load_scenario(data), ["exponential", "full_jitter"])
    assert [a.scenario.retry.params for a in arms] == [{}, {}]
    written = herdsim.load_scenario(make_scenario(retry={"preset": "grpc-retry",
                                                         "strategy": "exponential"}))
    assert written.retry.params == {}  # a strategy the user wrote beside the preset
    mine = make_scenario(retry={"preset": "grpc-retry", "params": {"jitter": 0.5}})
    mine["retry"].pop("strategy", None)
    with pytest.raises(herdsim.ScenarioError, match="retry.params"):
        herdsim.load_scenario(mine, {"retry.strategy": "exponential"})  # the user's: kept


def test_an_override_can_fill_an_optional_section(make_scenario):
    sc = herdsim.load_scenario(make_scenario(), {"downstream.rate_limit.rate": "100"})
    assert sc.downstream.rate_limit.rate == 100


def test_overrides_are_validated_like_the_file(make_scenario):
    assert fields(make_scenario(), {"workers.count": "many"}) == ["workers.count"]
    data = make_scenario(downstream={"outages": [{"start": "1s", "duration": "200ms"}]})
    [(field, _)] = problems(data, {"downstream.outages.0.duration": "5s"})
    assert field.startswith("downstream.outages.0")


@pytest.mark.parametrize(("path", "hint"), [
    ("retry.strategi", "did you mean 'strategy'"),
    ("nonsense", "no field 'nonsense'"),
    ("downstream.service.mean.x", "no field 'x'"),
    ("downstream.outages.3.duration", "list"),
    ("retry..base", "not a field path"),
])
def test_an_override_of_a_missing_path_is_rejected_naming_it(make_scenario, path, hint):
    data = make_scenario(downstream={"outages": [{"start": "1s", "duration": "200ms"}]})
    [(field, message)] = problems(data, {path: "1"})
    assert field == path and hint in message


def test_the_resolved_scenario_round_trips(make_scenario):
    """``to_dict`` (what scenario.yaml holds) loads back into the same scenario."""
    sc = herdsim.load_scenario(make_scenario(
        downstream={"outages": [{"start": "1s", "duration": "200ms", "mode": "slow"}]}))
    assert sc.queue == "tiny"
    assert herdsim.load_scenario(sc.to_dict()) == sc


@pytest.mark.parametrize(("change", "path"), [
    ({"services.db.retry_after": "limiter"}, "services.db.retry_after"),
    ({"services.db.discipline": "adaptive_lifo"}, "services.db.lifo_threshold"),
    ({"services.db.admission": "{kind: fixed}"}, "services.db.admission.limit"),
    ({"downstream.calls.0.retry.strategy": "nope"}, "downstream.calls.0.retry.strategy"),
    ({"services.api.calls.0.budget": "{kind: ratio, credit_on: first_try}"},
     "services.api.calls.0.budget.credit_on"),
    ({"downstream.retry_after": "limiter"}, "downstream.retry_after"),
    ({"workload.key_skew": "1"}, "workload.key_skew"),
])
def test_a_sections_check_names_the_path_where_the_section_sits(scenarios_dir, change, path):
    """A check written once in a section (a downstream's, a retry policy's, a budget's)
    blames the field where that section sits: a service's, an edge's, or the top one."""
    with pytest.raises(herdsim.ScenarioError) as caught:
        herdsim.load_scenario(scenarios_dir / "layers.yaml", overrides=change)
    assert [field for field, _ in caught.value.problems] == [path]


@pytest.mark.parametrize(("bundled", "model"), [("aws-2015", "occ"), ("reconnect", "broker")])
@pytest.mark.parametrize(("field", "value"), [
    ("workload.arrivals", "burst"),
    ("workload.spikes", [{"at": "1s", "duration": "1s", "rate": 5}]),
    ("workload.profile", [{"at": "0s", "rate": 1}, {"at": "1s", "rate": 5}]),
])
def test_clients_of_their_own_refuse_a_shaped_workload(bundled, model, field, value):
    """occ and broker clients (workers.count) all start at t=0: an arrival source, spikes
    or a profile would be silently ignored (a periodic broker ran as if they were not
    there), so each is refused naming the field and the model."""
    from herdsim.config import bundled as scenarios

    with pytest.raises(herdsim.ScenarioError, match=f"{field}: the {model} model"):
        herdsim.load_scenario(scenarios.path(bundled), {field: value})


def test_late_answers_behind_a_cache_are_refused_naming_the_field(make_scenario):
    """A cache's miss is a flight, the cache's own call, not a job's: a late answer to it
    crashed the run (``'Flight' object has no attribute 'job'``, the census's late answers
    + cache). Until modelled, the pair is refused in one line naming the field."""
    data = make_scenario(retry={"late_answers": True}, downstream={
        "timeout": "100ms", "cache": {"size": 5, "keys": {"count": 20}}})
    with pytest.raises(herdsim.ScenarioError) as refused:
        herdsim.load_scenario(data)
    assert refused.value.problems[0][0] == "retry.late_answers"
    assert "cache" in refused.value.problems[0][1]
    del data["downstream"]["cache"]
    assert herdsim.load_scenario(data).retry.late_answers  # the cache alone was refused

"""What ``herdsim predict`` refuses: every setting off its default that the fluid model does
not read (an allow-list, ``herdsim/fluid/reads.py``), named in one line; never guessed."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import tiny
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from scenario_gen import repaired, scenarios
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config.scenario import Scenario
from herdsim.config.schema import field_at, value_at
from herdsim.errors import CapacityError, ScenarioError
from herdsim.fluid import support
from herdsim.fluid.reads import allowed_paths

BUNDLED_REFUSED = [  # the bundled scenarios of mechanisms the model lacks, and the field
    ("gc.yaml", "downstream.degradation"),
    ("periodic.yaml", "workload.arrivals"),
    ("reconnect.yaml", "downstream.model"),
    ("fleet.yaml", "downstream.outages.0.replica"),
    ("aws-2015.yaml", "downstream.model"),
    ("autoscale.yaml", "workers.autoscale"),
    ("collapse.yaml", "downstream.network_delay"),
    ("stacks.yaml", "retry.throttling_base"),
]
BUNDLED_READ = ["outage.yaml", "poison.yaml", "brownout.yaml", "breaker.yaml", "budget.yaml",
                "metastable.yaml", "admission.yaml", "open_loop.yaml", "retry_after.yaml",
                "metastable_sweep.yaml", "testbed.yaml"]
OUTAGE = {"downstream": {"timeout": 1.0, "outages": [{"start": 0.5, "duration": 0.5}]}}


def refused(scenario) -> str:
    with pytest.raises(ScenarioError) as caught:
        herdsim.predict(scenario)
    said = str(caught.value)
    assert "\n" not in said and "predict cannot represent" in said
    return said


@pytest.mark.parametrize(("name", "path"), BUNDLED_REFUSED)
def test_a_bundled_scenario_beyond_the_model_is_refused_naming_its_field(
        scenarios_dir, name, path):
    assert refused(scenarios_dir / name).startswith(f"{path}:")


@pytest.mark.parametrize(("changes", "path"), [
    ({"retry": {"late_answers": True}, **OUTAGE}, "retry.late_answers"),
    ({"downstream": {"refusal_cost": {"rejected": 0.01}}}, "downstream.refusal_cost"),
    ({"downstream": {"replicas": 3}}, "downstream.replicas"),
    ({"budget": {"kind": "envoy"}}, "budget"),
    ({"budget": {"kind": "ratio", "scope": "worker"}}, "budget.scope"),
    ({"breaker": {"enabled": True, "resume_jitter": 1.0}}, "breaker.resume_jitter"),
    ({"workers": {"poll_interval": 0.5}}, "workers.poll_interval"),
    ({"downstream": {"request_delay": {"distribution": "constant", "mean": 0.01}}},
     "downstream.request_delay"),
    ({"retry": {"retry_on": ["timeout"]}}, "retry.retry_on"),
])
def test_a_setting_the_model_does_not_read_is_refused_naming_it(changes, path):
    assert refused(tiny(**changes)).startswith(f"{path}:")


def test_the_cli_refuses_gc_in_one_line_with_exit_2_and_writes_nothing(tmp_path,
                                                                       scenarios_dir):
    out = tmp_path / "p"
    said = CliRunner().invoke(app, ["predict", str(scenarios_dir / "gc.yaml"),
                                    "--out", str(out)])
    assert said.exit_code == 2, said.output
    assert len(said.output.strip().splitlines()) == 1
    assert "gc.yaml: downstream.degradation:" in said.output and "gc" in said.output
    assert not out.exists()


@pytest.mark.parametrize("name", BUNDLED_READ)
def test_what_a_bundled_scenario_sets_is_all_read(scenarios_dir, name):
    scenario = herdsim.load_scenario(scenarios_dir / name)
    support.check(scenario)
    unread = {support.plain(p) for p, _, _ in support.set_paths(scenario)} - allowed_paths()
    assert not unread


def test_the_walk_finds_exactly_what_differs_from_the_defaults():
    bare = herdsim.load_scenario(tiny())
    changed = herdsim.load_scenario(tiny(workload={"poison_fraction": 0.1},
                                         retry={"poison_retryable": False}))
    before = {p for p, _, _ in support.set_paths(bare)}
    after = {p for p, _, _ in support.set_paths(changed)}
    assert after - before == {"workload.poison_fraction", "retry.poison_retryable"}


def _really_set(doc: dict, scenario: Scenario, path: str) -> bool:
    """Whether *path* was written in *doc*, or holds other than its field's default."""
    data = doc
    for part in path.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            field = field_at(Scenario, path)
            return field is not None and value_at(scenario, path) != field.default
    return True


def _shortened(scenario: Scenario) -> Scenario | None:
    """*scenario* cut to at most 20 s (a fluid's cost is its steps), or None when that
    leaves it invalid (an outage past the end)."""
    doc = scenario.model_dump(mode="json", exclude_none=True)
    doc["duration"] = min(scenario.duration, 20.0)
    try:
        return herdsim.load_scenario(doc)
    except ScenarioError:
        return None


SETTINGS = dict(deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@settings(max_examples=6, **SETTINGS)
@given(st.data())
def test_a_few_scenarios_are_refused_naming_a_set_path_or_predicted(data):
    """The suite's short profile of the test below."""
    refused_or_predicted(data)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(st.data())
def test_any_scenario_is_refused_naming_a_set_path_or_predicted(data):
    """Refused: one line naming a path the scenario really sets. Else: every path it sets
    is one the model reads, and the model runs to its end."""
    refused_or_predicted(data)


def refused_or_predicted(data) -> None:
    """A drawn scenario refused in one line naming a path it really sets, or with every
    path it sets read and predicted to its end. A refused scenario has the named setting
    taken away and is tried again: so accepted ones are drawn too."""
    doc = data.draw(scenarios())
    scenario = repaired(copy.deepcopy(doc), data.draw)
    if scenario is None:
        return
    written = yaml.safe_load(yaml.safe_dump(doc))
    for _ in range(12):
        scenario = _shortened(scenario)
        if scenario is None:
            return
        problem = support.first_unread(scenario)
        if problem is None:
            break
        path = problem[0]
        assert _really_set(written, scenario, path), path
        with pytest.raises(ScenarioError, match=f"^{path}: ") as caught:
            herdsim.predict(scenario)
        assert "\n" not in str(caught.value)
        doc = scenario.model_dump(mode="json", exclude_none=True)
        _drop(doc, path.split("."))
        written = doc
        try:
            scenario = herdsim.load_scenario(doc)
        except ScenarioError:
            return
    else:
        return
    unread = {support.plain(p) for p, _, _ in support.set_paths(scenario)} - allowed_paths()
    assert not unread
    try:
        prediction = herdsim.predict(scenario)
    except CapacityError:
        return  # beyond the work budget: refused before it allocates (test_predict)
    assert prediction.summary["predicted"] == "fluid model"
    event("predicted")


def _drop(doc, parts: list[str]) -> None:
    """Take the setting at *parts* out of *doc* (its default comes back); a member's own
    field takes the member with it when it is its tag."""
    *head, last = parts
    for part in head:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    if isinstance(doc, list):
        doc.pop(int(last))
    else:
        doc.pop(last, None)

"""One normalisation path: scenario data from YAML, from Python (numpy scalars, tuples)
and from overrides becomes plain data, or one error naming the field."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import herdsim
from herdsim.config import arguments, plain
from herdsim.errors import ScenarioError, UsageError

TINY = {"name": "p", "seed": 1, "duration": "2s", "workload": {"rate": 5},
        "workers": {"count": 2}, "downstream": {"concurrency": 2, "service": {"mean": "5ms"}}}


def test_numpy_scalars_are_their_python_values():
    data = {**TINY, "seed": np.int64(7), "duration": np.float64(3.0),
            "workload": {"rate": np.float32(2.5)}, "workers": {"count": np.int32(3)}}
    scenario = herdsim.load_scenario(data)
    reference = herdsim.load_scenario({**TINY, "seed": 7, "duration": 3.0,
                                       "workload": {"rate": 2.5}, "workers": {"count": 3}})
    assert scenario.to_dict() == reference.to_dict()
    assert type(scenario.seed) is int


def test_numpy_values_in_overrides_are_their_python_values(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(TINY))
    scenario = herdsim.load_scenario(path, {"workers.count": np.int64(4),
                                            "workload.rate": np.float64(3.5)})
    assert (scenario.workers.count, scenario.workload.rate) == (4, 3.5)


@pytest.mark.parametrize("value", [object(), 1j, {1, 2}, b"bytes"])
def test_other_python_types_are_named_by_field(value):
    with pytest.raises(ScenarioError) as refused:
        herdsim.load_scenario({**TINY, "workload": {"rate": value}})
    assert refused.value.problems == [("workload.rate", refused.value.problems[0][1])]
    assert type(value).__name__ in refused.value.problems[0][1]


def test_order_and_nesting_are_kept_without_recursion():
    deep: list = []
    node = deep
    for _ in range(50_000):  # far deeper than Python's recursion limit
        node.append([])
        node = node[0]
    data = {"b": (1, np.int8(2)), "a": {"z": 1, "y": [np.bool_(True)]}, "deep": deep}
    copy = plain.plain(data)
    assert list(copy) == ["b", "a", "deep"] and list(copy["a"]) == ["z", "y"]
    assert copy["b"] == [1, 2] and copy["a"]["y"] == [True]
    assert type(copy["a"]["y"][0]) is bool


@pytest.mark.parametrize("digits", [plain.MAX_DIGITS + 1, 5000])
def test_a_whole_number_too_long_is_named_by_field_in_yaml_and_sets(tmp_path, digits):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(TINY).replace("seed: 1", "seed: " + "9" * digits))
    with pytest.raises(ScenarioError) as refused:
        herdsim.load_scenario(path)
    assert refused.value.problems[0][0] == "seed"
    assert "set_int_max_str_digits" not in str(refused.value)
    path.write_text(yaml.safe_dump(TINY))
    with pytest.raises(ScenarioError) as refused:
        herdsim.load_scenario(path, {"workers.count": "9" * digits})
    assert refused.value.problems[0][0] == "workers.count"
    with pytest.raises(ScenarioError, match="^seed: "):
        herdsim.load_scenario({**TINY, "seed": 10 ** digits})


def test_a_whole_number_within_the_limit_is_read():
    assert herdsim.load_scenario({**TINY, "seed": 2 ** 128}).seed == 2 ** 128


@pytest.mark.parametrize(("argument", "value"), [
    ("replications", 2.5), ("replications", "2"), ("replications", True),
    ("scheduler", 123), ("progress", "yes"), ("grid", 5), ("sets", ["a=1"]),
    ("processes", 0)])
def test_sweep_arguments_of_the_wrong_type_are_one_line(tmp_path, argument, value):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(TINY))
    with pytest.raises(UsageError, match=f"^{argument}="):
        herdsim.sweep(path, **{argument: value}, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_numpy_whole_numbers_are_whole_numbers():
    assert arguments.whole("replications", np.int64(3)) == 3
    assert type(arguments.whole("replications", np.int64(3))) is int
    with pytest.raises(UsageError):
        arguments.whole("replications", np.float64(3.0))

"""Reading an output directory's ``scenario.yaml`` (herdsim/outputs/reading.py): older
releases wrote every member's fields with their defaults; such a sealed file still loads,
while a scenario a user writes with another member's field is refused."""

from __future__ import annotations

import pytest
import yaml

import herdsim
from herdsim.errors import ScenarioError
from herdsim.outputs import reading
from herdsim.outputs.atomic import seal  # the folder's checksums, as a writer leaves them

OLD_BUDGET = {  # how herdsim 0.x wrote a token bucket: every kind's fields, defaults filled
    "kind": "token_bucket", "scope": "pool", "preset": "aws", "k": 2.0,
    "min_per_second": 10.0, "credit_on": "success", "window": 10.0, "ratio": 0.2,
}


def written(tmp_path, budget: dict):
    res = herdsim.run(herdsim.load_scenario({"name": "old", "duration": "1s",
                                             "workload": {"rate": 20}}))
    herdsim.save(res, tmp_path / "run", formats=[])
    path = tmp_path / "run" / "scenario.yaml"
    data = yaml.safe_load(path.read_text())
    data["budget"] = budget
    path.write_text(yaml.safe_dump(data))
    seal(tmp_path / "run")
    return data


def test_an_older_dump_with_every_members_defaults_loads(tmp_path):
    written(tmp_path, OLD_BUDGET)
    sc = reading.scenario(tmp_path / "run")
    assert sc.budget.kind == "token_bucket" and not hasattr(sc.budget, "k")


def test_a_user_s_scenario_with_a_default_of_another_member_is_refused(tmp_path):
    data = {"name": "mine", "duration": "1s", "workload": {"rate": 20}, "budget": OLD_BUDGET}
    with pytest.raises(ScenarioError, match="only an adaptive retry budget has k"):
        herdsim.load_scenario(data)

"""The refusal_cost section and the degradation checks of the downstream section: bounds,
durations, and the combinations refused with the field named."""

from __future__ import annotations

import pytest
from conftest import tiny

import herdsim
from herdsim.errors import ScenarioError
from herdsim.policies.refusal_cost import OUTCOMES, RefusalCost


def test_durations_and_whether_anything_costs():
    assert not RefusalCost().costs()
    assert not RefusalCost(rejected=0, shed="0ms").costs()
    cost = RefusalCost(rejected="2ms", expired="1s")
    assert (cost.rejected, cost.expired) == (0.002, 1.0)
    assert cost.costs()
    assert set(OUTCOMES) == set(RefusalCost.model_fields)


@pytest.mark.parametrize("downstream, where, words", [
    ({"refusal_cost": {"shed": "-1ms"}}, "downstream.refusal_cost.shed", "greater than"),
    ({"refusal_cost": {"shed": "2h"}}, "downstream.refusal_cost.shed", "less than"),
    ({"refusal_cost": {"refused": "1ms"}}, "downstream.refusal_cost.refused", ""),
    ({"degradation": {"kind": "contention", "per_call": 1, "recovery": "1s"},
      "overload": {"latency_model": "continuous"}}, "downstream.degradation", "at_start"),
    ({"model": "occ", "degradation": {"kind": "contention", "per_call": 1,
                                      "recovery": "1s"}},
     "downstream.degradation", "model: queue"),
    ({"model": "occ", "refusal_cost": {"rejected": "1ms"}}, "downstream.refusal_cost",
     "model: queue"),
])
def test_bad_settings_are_refused_naming_the_field(downstream, where, words):
    with pytest.raises(ScenarioError) as caught:
        herdsim.load_scenario(tiny(downstream=downstream))
    place, problem = caught.value.problems[0]
    assert place == where and words in problem

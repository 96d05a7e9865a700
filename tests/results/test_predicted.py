"""The Python API's prediction (herdsim/results/predicted.py): its figure says whose
numbers it shows, and when the model does not claim a state, why."""

from __future__ import annotations

import pytest

import herdsim


@pytest.mark.parametrize(("strategy", "near"), [("grpc_connect", True),
                                                ("exponential", False)])
def test_the_timeline_title_carries_the_near_threshold_note(scenarios_dir, strategy, near):
    """A reader of the figure alone must not trust a state the model refuses to call:
    admission under grpc_connect is near threshold (docs/validation.md §7), under
    exponential it is not."""
    scenario = herdsim.load_scenario(scenarios_dir / "admission.yaml")
    scenario = herdsim.load_scenario({**scenario.to_dict(),
                                      "retry": {**scenario.to_dict()["retry"],
                                                "strategy": strategy}})
    prediction = herdsim.predict(scenario)
    title = prediction.plot()._suptitle.get_text().replace("\n", " ")
    assert "predicted (fluid model)" in title
    note = prediction.summary["near_threshold"]
    assert (note is not None) is near
    assert ("near threshold, so no state is claimed" in title) is near
    if near:
        assert " ".join(note.split()) in " ".join(title.split())


def test_a_notebook_shows_what_the_cli_prints(scenarios_dir):
    """The prediction's table in a notebook: run's rows under the KPI registry's labels
    (each once), the predicted-only ones marked †, and the notes; its repr one line that
    says whose numbers they are."""
    from herdsim.analysis.kpis import on

    prediction = herdsim.predict(scenarios_dir / "outage.yaml")
    s = prediction.summary
    html = prediction._repr_html_()
    for kpi in on("run"):
        assert (f"<td>{kpi.title(s)}" in html) is kpi.listed(s), kpi.key
    assert html.count(" †</td>") == 3 and "predicted (fluid model)" in html
    text = repr(prediction)
    assert "\n" not in text and "fluid model" in text and "not recovered" in text


@pytest.mark.parametrize("state", ["near threshold", "metastable"])
def test_a_metastable_state_with_the_note_is_not_called_unclaimed(state):
    """The note comes with two states: near threshold (no state claimed) and metastable
    (kept: a crash more cannot lift it); the words say which."""
    from herdsim.analysis.kpis.predicted import near_text

    said = near_text(state, "the busiest 100 ms holds 148 calls")
    assert said.endswith(": the busiest 100 ms holds 148 calls")
    assert ("no state is claimed" in said) is (state == "near threshold")
    assert ("metastable all the same" in said) is (state == "metastable")
    assert near_text(state, None) is None

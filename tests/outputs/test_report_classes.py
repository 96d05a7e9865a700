"""The report's and the comparison table's criticality classes
(``outputs/report/classes.py``, ``cli/class_table.py``): per arm, each class present
with the numbers of its runs' summaries (their mean over replications); nothing for arms
or comparisons without classes."""

from __future__ import annotations

import pytest
from conftest import tiny

import herdsim
from herdsim.cli.class_table import compare_class_table
from herdsim.config.loading import validate
from herdsim.outputs.report import classes

MIX = {"critical": 1, "sheddable": 1}


@pytest.fixture(scope="module")
def comparison():
    """Two arms, two replications: with classes, and without (criticality null)."""
    sc = validate(tiny(duration=5, workload={"rate": 300, "criticality": MIX},
                       downstream={"concurrency": 5, "queue_limit": 5,
                                   "shedding": {"above": 2, "probability": 0}}))
    return herdsim.compare(sc, vary={"workload.criticality": [MIX, None]},
                           replications=2, processes=1, progress=False)


def test_each_class_of_an_arm_with_classes_has_its_runs_mean(comparison):
    found = classes.rows(comparison)
    assert [(r["class"]) for r in found] == ["critical", "sheddable"]  # the other: none
    runs = comparison.runs[comparison.runs["arm"] == found[0]["arm"]]
    for row in found:
        share = runs[f"classes.{row['class']}.succeeded_fraction"].mean()
        assert row["succeeded %"] == f"{100 * share:.1f}"
    html = classes.section(comparison)
    assert "Per criticality class" in html and "sheddable" in html
    assert compare_class_table(comparison).row_count == 2


def test_nothing_without_classes():
    c = herdsim.compare(validate(tiny(duration=2)), strategies=["full_jitter"],
                        processes=1, progress=False)
    assert classes.section(c) == "" and compare_class_table(c) is None

"""The run table's classes (``cli/class_table.py``): a row per class of the summary, in
its order; none without classes."""

from __future__ import annotations

from herdsim.cli.class_table import class_table


def test_a_row_per_class_and_none_without():
    row = {"jobs": 10, "succeeded": 4, "dead_lettered": 6, "succeeded_fraction": 0.4,
           "latency_p99": None}
    table = class_table({"classes": {"critical": row, "sheddable": {**row, "jobs": 0,
                                                                   "succeeded_fraction": None}}})
    assert table is not None
    assert list(table.columns[0].cells) == ["critical", "sheddable"]
    assert list(table.columns[4].cells) == ["40.0", "n/a"]
    assert class_table({"state": "recovered"}) is None

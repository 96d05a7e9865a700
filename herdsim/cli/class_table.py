"""The criticality classes (summary.json's ``classes``) in the terminal: the run table's
row per class, and the comparison's row per arm and class; highest class first."""

from __future__ import annotations

from rich.table import Table

from herdsim.analysis.kpis import number_text
from herdsim.outputs.report.classes import rows


def class_table(summary: dict) -> Table | None:
    """Each class's jobs, successes, dead letters, succeeded share and success p99; None
    for a run without classes."""
    classes = summary.get("classes")
    if not classes:
        return None
    table = Table(title="per criticality class (summary.json's classes)", show_header=True,
                  header_style="bold")
    table.add_column("class")
    for name in ("jobs", "succeeded", "dead-lettered", "succeeded %", "p99 of successes s"):
        table.add_column(name, justify="right")
    for name, row in classes.items():
        share, p99 = row.get("succeeded_fraction"), row.get("latency_p99")
        table.add_row(name, number_text(row["jobs"]), number_text(row["succeeded"]),
                      number_text(row["dead_lettered"]),
                      "n/a" if share is None else f"{100 * share:.1f}",
                      "n/a" if p99 is None else number_text(p99))
    table.caption = CAPTION
    return table


def compare_class_table(comparison) -> Table | None:
    """Per arm, each class's jobs, successes' share, dead letters and success p99 (the
    mean over replications); None when no arm has classes."""
    found = rows(comparison)
    if not found:
        return None
    table = Table(title="per arm and criticality class (runs.csv's classes.*, the mean "
                        "over replications)", show_header=True, header_style="bold")
    for name in found[0]:
        table.add_column(name, justify="left" if name in ("arm", "class") else "right")
    previous = None
    for row in found:  # the arm named on its first row
        shown = {**row, "arm": "" if row["arm"] == previous else row["arm"]}
        table.add_row(*(str(v) for v in shown.values()), end_section=False)
        previous = row["arm"]
    table.caption = CAPTION
    return table


CAPTION = ("highest class first; under overload the waiting room (shed_priority), shedding, "
           "the admission limit and CoDel drop the lowest class first")

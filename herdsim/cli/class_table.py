"""The run table's criticality classes (summary.json's ``classes``): a row per class,
highest first."""

from __future__ import annotations

from rich.table import Table

from herdsim.analysis.kpis import number_text


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
    table.caption = ("highest class first; a full waiting room pushes out the lowest "
                     "class first (shed_priority)")
    return table

"""Rich tables of a run's summary and a comparison's ranking, from the KPI registry."""

from __future__ import annotations

from rich import box
from rich.table import Table

from herdsim.analysis.kpis import BY_KEY, COMPARE_TABLE, RUN_TABLE, format_value
from herdsim.cli.app import safe
from herdsim.results.comparison import Comparison


def summary_table(summary: dict, title: str) -> Table:
    """The run summary: one row per KPI of the registry's run table."""
    table = Table(title=safe(title), show_header=True, header_style="bold")
    table.add_column("KPI")
    table.add_column("value", justify="right")
    table.add_column("unit")
    for key in RUN_TABLE:
        kpi = BY_KEY[key]
        if key not in summary or (kpi.optional and not summary[key]):
            continue
        value = summary[key]
        if key == "recovery_time" and value is None:
            shown = "[red]never[/]" if summary.get("outages") else "no outage"
            table.add_row(kpi.label, shown, "")
            continue
        table.add_row(kpi.label, format_value(value), kpi.unit)
    return table


def ranked_table(comparison: Comparison) -> Table:
    """The comparison's arms, best first, with the registry's comparison columns."""
    reps = comparison.replications
    caption = "ranked by recovery time (never last), then peak / capacity"
    table = Table(title=f"{safe(comparison.scenario.name)}: {len(comparison.arms)} arms "
                        f"varying {safe(comparison.varied)}, "
                        f"{reps} replication{'s' * (reps > 1)} each",
                  caption=caption + ("; ± = 95% confidence interval" if reps > 1 else ""),
                  header_style="bold", box=box.SIMPLE_HEAD)
    frame = comparison.table().drop(columns=[COMPARE_TABLE[key] for key in
                                             ("amplification", "jobs_pending")])
    table.add_column("#", justify="right")
    table.add_column("arm", overflow="fold")
    for column in frame.columns[1:]:
        table.add_column(column.replace(" ", "\n"), justify="right")
    for rank, row in frame.iterrows():
        cells = ["[red]never[/]" if value == "never" else safe(value).replace(" ±", "\n±")
                 for value in row]
        table.add_row(str(rank), *cells)
    return table

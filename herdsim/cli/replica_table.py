"""The run table's replicas: one table per tier with replicas (summary.json's
``replicas``), a row per replica, or for a large fleet the replicas with the most
failures and a note on the rest."""

from __future__ import annotations

from rich.table import Table

from herdsim.analysis.kpis import number_text
from herdsim.cli.app import safe

SHOWN = 12  # rows of one table; a larger fleet shows its worst SHOWN - 2 and a note
STATE_STYLE = {"up": "green", "down": "bold red", "ejected": "yellow",
               "unhealthy": "yellow"}


def replica_tables(summary: dict) -> list[Table]:
    """A table per tier of *summary*'s ``replicas`` (none without replicas)."""
    return [_table(tier, rows) for tier, rows in summary.get("replicas", {}).items()]


def _table(tier: str, rows: dict[str, dict]) -> Table:
    table = Table(title=f"replicas of {safe(tier)} (summary.json's replicas.{safe(tier)})",
                  show_header=True, header_style="bold")
    for name in ("replica", "calls", "failures", "failed %", "ejections"):
        table.add_column(name, justify="right")
    table.add_column("state at the end")
    shown = list(rows.items())
    notes = ["calls: sent to the replica by its balancer; failures: those it answered "
             "with anything but success (refused, error, timeout, failed)"]
    if len(shown) > SHOWN:
        worst = sorted(shown, key=lambda kv: (-kv[1]["failures"], -kv[1]["calls"],
                                              int(kv[0])))[:SHOWN - 2]
        rest = [row for i, row in shown if i not in dict(worst)]
        shown = sorted(worst, key=lambda kv: int(kv[0]))
        notes.insert(0, f"the {len(shown)} replicas with the most failures of "
                        f"{len(rows)}; the other {len(rest)}: "
                        f"{number_text(sum(r['calls'] for r in rest))} calls, "
                        f"{number_text(sum(r['failures'] for r in rest))} failures, "
                        f"{sum(r['state'] != 'up' for r in rest)} not up at the end")
    for i, row in shown:
        share = 100 * row["failures"] / row["calls"] if row["calls"] else None
        state = row["state"]
        table.add_row(i, number_text(row["calls"]), number_text(row["failures"]),
                      "n/a" if share is None else f"{share:.1f}",
                      number_text(row["ejections"]),
                      f"[{STATE_STYLE.get(state, 'default')}]{state}[/]")
    table.caption = "; ".join(notes)
    return table

"""``herdsim schema`` (the scenario's JSON Schema) and ``herdsim families`` (every choice a
scenario makes by a tag, and what each member declares)."""

from __future__ import annotations

import sys

from rich import box
from rich.markup import escape
from rich.table import Table

from herdsim.cli.app import app, console


@app.command()
def schema() -> None:
    """Print the JSON Schema of a scenario file (for an editor: the bundled scenarios'
    first line, `# yaml-language-server: $schema=scenario.schema.json`, points to it).

    Generated from the scenario's sections and the families' members, so it is what
    `herdsim validate` accepts: an editor with a YAML language server completes fields and
    flags a wrong one as you type. Save it with `herdsim schema > scenario.schema.json`.
    """
    from herdsim.config.json_schema import schema_text

    sys.stdout.write(schema_text())


@app.command()
def families() -> None:
    """List every family of mechanisms a scenario chooses by a tag, and its members.

    For each member: what it is, whether a scenario using it keeps the workers' fast
    loop, whether `herdsim testbed` and `herdsim serve` run it for real, and its fluid
    (mean-field) form, or none.
    """
    for table in tables():
        console.print(table)


def tables() -> list[Table]:
    """A table per family: its members and what each declares."""
    from herdsim.config.families import FAMILIES

    found = []
    for family in FAMILIES:
        table = Table(title=f"{family.name} ({family.tag}:)", box=box.SIMPLE_HEAD,
                      title_justify="left")
        for heading in ("member", "what it is", "fast path", "testbed", "fluid form"):
            table.add_column(heading, overflow="fold")
        for row in family.rows():
            table.add_row(*(escape(cell) for cell in row))  # [0, v]: text, not markup
        found.append(table)
    return found

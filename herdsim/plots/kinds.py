"""The figure kinds, by name: what ``herdsim plot --kinds`` offers, without importing
matplotlib (``plots.figures`` draws them, in this order)."""

from typing import Any

FIGURES = ("timeline", "landing", "sleeps", "kpis", "graph")
GRAPH_ONLY = ("graph",)  # drawn only for a call graph (a scenario with services)


def applies(kind: str, scenario: Any) -> bool:
    """Whether figure *kind* has something to show for *scenario*: ``graph`` only for a
    call graph of two tiers or more."""
    return kind not in GRAPH_ONLY or bool(getattr(scenario, "services", None))

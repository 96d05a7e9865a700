"""A finished sweep in memory: its runs, its cells' classes, its map (``herdsim.sweep``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from herdsim.analysis import metastability
from herdsim.plots.metastability_map import plot_map


@dataclass
class SweepResult:
    """``runs``: one row per task (the swept values, ``strategy``, ``replication`` and the
    run's summary KPIs); ``manifest``: what was swept; ``out``: the sweep's directory."""

    runs: pd.DataFrame = field(repr=False)
    manifest: dict[str, Any] = field(repr=False)
    out: Path

    @property
    def axes(self) -> list[str]:
        """The swept fields, in grid order."""
        return [axis["path"] for axis in self.manifest["axes"]]

    def cells(self) -> pd.DataFrame:
        """One row per strategy and cell: its class, runs, agreement and median recovery
        (:func:`herdsim.analysis.metastability.cells`)."""
        return metastability.cells(self.runs, self.axes)

    def counts(self) -> pd.DataFrame:
        """Cells of each class under each strategy."""
        return metastability.class_counts(self.runs, self.axes, self.manifest["strategies"])

    def plot(self, x: str | None = None, y: str | None = None):
        """The metastability map (a matplotlib Figure; *x*, *y*: swept fields)."""
        return plot_map(self.runs, self.manifest, x, y)

    def __repr__(self) -> str:
        counts = self.counts()
        parts = "; ".join(f"{strategy}: " + ", ".join(f"{n} {c}" for c, n in row.items() if n)
                          for strategy, row in counts.iterrows())
        return (f"<SweepResult {len(self.runs)} runs over {' x '.join(self.axes) or 'no axis'}"
                f" in {self.out}: {parts}>")

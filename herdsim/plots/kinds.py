"""The figure kinds, by name: what ``herdsim plot --kinds`` offers, without importing
matplotlib (``plots.figures`` draws them, in this order)."""

FIGURES = ("timeline", "landing", "sleeps", "kpis")

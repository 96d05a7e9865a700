"""Figures of a comparison (or of one run): ``timeline``, ``landing``, ``sleeps``, ``kpis``.

Built on matplotlib's object API (no pyplot state, no GUI backend): each function returns
a :class:`~matplotlib.figure.Figure` that Jupyter displays and ``savefig`` writes as PNG,
SVG or PDF, 16:9 unless many arms need more height. Colours come from the Okabe-Ito and Tol
palettes (safe for colour-blind readers), one per arm, distinct within a figure; the first
arm of each strategy or preset keeps that policy's own colour. Titles say what the scenario
contains and what was changed from its bundled file; labels sit in titles and legends,
never over the data. One module per figure; this one names them and draws one by name.
"""

from __future__ import annotations

from importlib import import_module

from herdsim.analysis.theory import binned, expected_counts, simulated_counts, sleep_prev
from herdsim.plots import coarse
from herdsim.plots.kinds import FIGURES
from herdsim.plots.style import (
    STRATEGY_COLORS,
    STYLE,
    Comparison,
    Figure,
    arm_styles,
    strategy_color,
)
from herdsim.plots.timeline import call_counts, tier_names, timeline

__all__ = ["FIGURES", "STRATEGY_COLORS", "STYLE", "Figure", "arm_styles", "binned",
           "call_counts", "draw", "expected_counts", "simulated_counts", "sleep_prev",
           "strategy_color", "tier_names", "timeline"]


# kind -> the module that draws it and its function: imported when first drawn (a run
# draws two of the five; the others' modules need not load)
PLOTS = {"timeline": ("timeline", "timeline"), "landing": ("landing", "landing"),
         "sleeps": ("sleeps", "sleeps"), "kpis": ("kpis", "kpis"),
         "graph": ("callgraph", "graph")}
BY_TIME = ("timeline",)  # drawn from the time series (landing thins its own 10 ms steps)


def draw(c: Comparison, kind: str) -> Figure:
    """The figure *kind* (``timeline``, ``landing``, ``sleeps`` or ``kpis``) of *c*."""
    if kind not in PLOTS:
        raise ValueError(f"unknown plot {kind!r}; choose one of {', '.join(PLOTS)}")
    module, name = PLOTS[kind]
    plot = getattr(import_module(f"herdsim.plots.{module}"), name)
    if kind not in BY_TIME:
        return plot(c)
    drawn, note = coarse.for_drawing(c)
    figure = plot(drawn)
    if note:  # under everything, where the layout makes room for it
        figure.supxlabel(note, fontsize=11, color="0.35")
    return figure

"""A long run drawn whole: more bins than a figure has pixels are aggregated for drawing.

Drawing 20,000 one-second bins per line gains nothing a reader can see and can exceed
what the renderer holds (matplotlib's ``OverflowError``). :func:`for_drawing` merges
``k`` neighbouring bins into one (counts summed, gauges averaged, short-window peaks
kept at their maximum) so a run has at most :data:`MAX_BINS` per line, and the figure
says so. The data files keep every bin; only the picture is coarser.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import StepPatch

from herdsim.model.recorder import GAUGES, MECHANISM_GAUGES
from herdsim.plots.style import Comparison
from herdsim.policies.durations import format_duration

MAX_BINS = 4000  # per line: more than twice the pixels of a 16-inch figure at 100 dpi
KEYS = ("arm", "replication")


def factor(bins: int) -> int:
    """How many bins are merged into one drawn bin (1: none)."""
    return max(1, math.ceil(bins / MAX_BINS))


def for_drawing(c: Comparison) -> tuple[Comparison, str | None]:
    """*c* itself when it fits, else a copy with merged bins and the note that says so."""
    bin_width = c.scenario.bin
    bins = int(c.timeseries.groupby(list(KEYS)).size().max()) if len(c.timeseries) else 0
    k = factor(bins)
    if k == 1:
        return c, None
    wide = {"bin": bin_width * k}
    arms = [dataclasses.replace(arm, scenario=arm.scenario.model_copy(update=wide))
            for arm in c.arms]
    coarse = dataclasses.replace(  # type: ignore[type-var]  # a results.Comparison
        c, scenario=c.scenario.model_copy(update=wide), arms=arms,
        timeseries=_merge(c.timeseries, k, {}),
        peaks=None if c.peaks is None else _merge(c.peaks, k, {"peak_rate": "max"}))
    note = (f"drawn from {format_duration(bin_width * k)} bins: the run's {bins:,} "
            f"{format_duration(bin_width)} bins merged {k} by {k} to fit the figure "
            "(the data files keep every bin)")
    return coarse, note


def _merge(frame: pd.DataFrame, k: int, how: dict[str, str]) -> pd.DataFrame:
    """Every *k* consecutive rows of each run merged: time is the first, counts summed,
    gauges averaged, columns in *how* as it says."""
    position = frame.groupby(list(KEYS)).cumcount() // k
    rules = {column: how.get(column, "first" if column == "time" else
                             "mean" if column in GAUGES or column in MECHANISM_GAUGES
                             else "sum")
             for column in frame.columns if column not in KEYS}
    merged = frame.groupby([*KEYS, position], sort=False).agg(rules).reset_index(
        level=list(KEYS))
    return merged.reset_index(drop=True)


def stairs(ax: Any, values: np.ndarray, edges: np.ndarray, **kwargs: Any) -> StepPatch:
    """``ax.stairs(values, edges, **kwargs)``, the same patch and data limits, without
    matplotlib's Python loop over every step to find those limits (a tenth of a second
    for the landing figure's 15,000 steps): drawn on the first step, then given every
    step, the limits taken from its vertices at once (its segments are straight, so
    their extremes are their ends)."""
    patch = ax.stairs(values[:1], edges[:2], **kwargs)
    patch.set_data(values, edges)
    ax.update_datalim(patch.get_path().vertices)
    return patch

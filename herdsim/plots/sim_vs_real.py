"""``sim_vs_real``: the simulation of a scenario beside the testbed's real run of it.

One time axis, three panels: downstream calls per second and successes per second (per
bin of the scenario), and the jobs waiting (main queue plus retries). The outages are
shaded.
"""

from __future__ import annotations

import textwrap

import matplotlib as mpl
import numpy as np
import pandas as pd

from herdsim.config.scenario import Scenario
from herdsim.plots.style import STYLE, WIDE, Figure, shade_outages

SIM_STYLE = {"color": "#0072B2", "linewidth": 2.0, "label": "simulated"}
NOTE_WIDTH = 110  # characters of the note on one line of the figure
REAL_STYLE = {"color": "#D55E00", "linewidth": 1.6, "linestyle": "--", "label": "real (testbed)"}


def sim_vs_real(scenario: Scenario, sim: pd.DataFrame, real: pd.DataFrame,
                note: str = "") -> Figure:
    """A figure of the time series *sim* and *real* (``herdsim run``'s ``timeseries``
    columns) of *scenario*; *note* goes under the title (the lateness, say)."""
    width = scenario.bin
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=WIDE, layout="constrained")
        axes = fig.subplots(3, 1, sharex=True)
        panels = (("attempts", "downstream calls/s"), ("success", "successes/s"))
        for ax, (column, label) in zip(axes, panels, strict=False):
            for frame, style in ((sim, SIM_STYLE), (real, REAL_STYLE)):
                ax.plot(frame["time"], frame[column] / width, drawstyle="steps-post", **style)
            ax.set_ylabel(label)
        ax = axes[2]
        for frame, style in ((sim, SIM_STYLE), (real, REAL_STYLE)):
            ax.plot(frame["time"], np.asarray(frame["queue_depth"] + frame["delayed"]),
                    drawstyle="steps-post", **style)
        ax.set_ylabel("jobs waiting\n(queue + retries)")
        ax.set_xlabel("time (s)")
        for ax in axes:
            shade_outages(ax, scenario)
        axes[0].legend(loc="upper right")
        fig.suptitle(f"{scenario.name}: simulated and real ({scenario.retry.strategy}, "
                     f"seed {scenario.seed}, {width * 1e3:g} ms bins)")
        if note:  # wrapped: a reason for invalidity does not fit on one line
            axes[0].set_title(textwrap.fill(note, NOTE_WIDTH), fontsize="medium")
    return fig

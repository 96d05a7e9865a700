"""The offered load on the timeline's successes panel (see :mod:`herdsim.plots.timeline`)."""

from __future__ import annotations

from herdsim.config.scenario import Scenario
from herdsim.plots.style import one


def draw(ax, c, base: Scenario, replication: int) -> str:
    """Draw what the workload offers, dotted, and return the title's words for it: a flat
    line at ``workload.rate`` when the rate holds, else the jobs arriving per second (a
    profile or spikes change it: a flat line at the first step's rate read as the
    offered load all run long)."""
    workload = base.workload
    if not workload.profile and not workload.spikes:
        ax.axhline(workload.rate, color="0.3", linestyle=":", lw=1.6)
        return f"; dotted: offered {workload.rate:,.4g} jobs/s"
    ts = one(c.timeseries, c.arms[0].label, replication)  # the arms share their arrivals
    width = base.bin
    ax.plot(ts["time"] + width / 2, ts["arrivals"] / width, color="0.3", linestyle=":",
            lw=1.6)
    what = "profile" if workload.profile else "spikes"
    return f"; dotted: jobs arriving per second (the {what})"

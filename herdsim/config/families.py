"""Every family of the scenario, in the order the docs list them: what ``herdsim
families``, the docs table and the testbed's allow-list read (each member declares the
rest: see :mod:`herdsim.policies.family`)."""

from __future__ import annotations

from herdsim.policies import arrivals, autoscale, distributions, downstreams, limiters, outages
from herdsim.policies.family import Family

FAMILIES: tuple[Family, ...] = (
    arrivals.FAMILY,
    downstreams.FAMILY,
    outages.FAMILY,
    distributions.FAMILY,
    limiters.FAMILY,
    autoscale.FAMILY,
)

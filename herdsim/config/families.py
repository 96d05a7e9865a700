"""Every family of the scenario, in the order the docs list them: what ``herdsim
families``, the docs table and the testbed's allow-list read (each member declares the
rest: see :mod:`herdsim.policies.family`)."""

from __future__ import annotations

from herdsim.policies import (
    adaptive,
    backoff,
    breaker,
    budgets,
    codel,
    disciplines,
    limiters,
    shedding,
)
from herdsim.policies.backoff.registry import Registry
from herdsim.policies.family import Family

FAMILIES: tuple[Family | Registry, ...] = (  # Registry: the backoff strategies
    disciplines.FAMILY,
    codel.FAMILY,
    shedding.FAMILY,
    limiters.FAMILY,
    budgets.FAMILY,
    breaker.FAMILY,
    adaptive.FAMILY,
    backoff.FAMILY,
)

"""Every family of the scenario, in the order the docs list them: what ``herdsim
families``, the docs table and the testbed's allow-list read (each member declares the
rest: see :mod:`herdsim.policies.family`)."""

from __future__ import annotations

from herdsim.policies import (
    adaptive,
    arrivals,
    autoscale,
    backoff,
    balancers,
    breaker,
    budgets,
    cache,
    codel,
    criticality,
    degradation,
    disciplines,
    distributions,
    downstreams,
    limiters,
    outages,
    rate_limit,
    shedding,
)
from herdsim.policies.backoff.registry import Registry
from herdsim.policies.balancers import outlier
from herdsim.policies.family import Family

FAMILIES: tuple[Family | Registry, ...] = (  # Registry: the backoff strategies
    arrivals.FAMILY,
    criticality.FAMILY,
    downstreams.FAMILY,
    outages.FAMILY,
    rate_limit.FAMILY,
    *cache.FAMILIES,
    distributions.FAMILY,
    disciplines.FAMILY,
    codel.FAMILY,
    shedding.FAMILY,
    limiters.FAMILY,
    degradation.FAMILY,
    budgets.FAMILY,
    breaker.FAMILY,
    adaptive.FAMILY,
    autoscale.FAMILY,
    balancers.FAMILY,
    outlier.OUTLIER,
    outlier.HEALTH_CHECK,
    backoff.FAMILY,
)


def markdown() -> str:
    """The families as the docs show them (``docs/scenarios.md``, between its ``families``
    markers; ``tests/test_docs.py`` keeps the two equal): a table per family."""
    parts = []
    for family in FAMILIES:
        rows = [f"**{family.name}** (`{family.tag}:`)", "",
                "| member | what it is | fast path | testbed | fluid form |",
                "|---|---|---|---|---|"]
        rows += ["| " + " | ".join(f"`{cell}`" if i == 0 else cell
                                   for i, cell in enumerate(row)) + " |"
                 for row in family.rows()]
        parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"

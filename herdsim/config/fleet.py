"""The checks a tier's fleet fields make together (``replicas``, ``balancer``,
``outlier_detection``, ``health_check``, an outage's ``replica``): the fleet's parts
only with replicas, an outage's replica among them (not a cache's flush: the cache is in
front of them all), a weight per replica."""

from __future__ import annotations

from typing import Any

from herdsim.policies import downstreams
from herdsim.policies.fields import FieldError

PARTS = ("balancer", "outlier_detection", "health_check")


def check(section: Any) -> None:
    """Refuse *section*'s fleet fields that do not fit together (a ``FieldError``)."""
    n = section.replicas
    if n is None:
        for part in PARTS:
            if getattr(section, part) is not None:
                raise FieldError(part, f"{part} needs replicas (a tier of one pool has "
                                       "nothing to balance)")
    elif not downstreams.named(section.model).queueing:  # slots and outages to copy
        raise FieldError("replicas", f"replicas need a queueing model (this one is model: "
                                     f"{section.model})")
    for k, outage in enumerate(section.outages):
        if outage.replica is None:
            continue
        if n is None:
            raise FieldError(f"outages.{k}.replica", "replica needs replicas on its tier")
        if outage.needs_cache:
            raise FieldError(f"outages.{k}.replica", f"a {outage.name()} outage empties "
                                                     "the one cache in front of the whole "
                                                     "tier: it takes no replica")
        if outage.replica >= n:
            raise FieldError(f"outages.{k}.replica", f"replica {outage.replica} does not "
                                                     f"exist: replicas are 0 to {n - 1}")
    weights = getattr(section.balancer, "weights", None)
    if n is not None and weights is not None and len(weights) != n:
        raise FieldError("balancer.weights", f"{len(weights)} weights for {n} replicas: "
                                             "one per replica")

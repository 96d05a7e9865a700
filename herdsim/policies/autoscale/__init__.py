"""The autoscaler's metric (``workers.autoscale.metric``), one module each:
:mod:`.queue_depth` (KEDA) and :mod:`.busy_fraction` (the HPA), and the decision both
feed, :class:`~herdsim.policies.autoscale.scaler.Autoscaler` (pure, no SimPy). A new
metric is a module here with its ``ratio`` and one entry in :data:`FAMILY`.
"""

from __future__ import annotations

from herdsim.policies.autoscale.busy_fraction import BusyFraction
from herdsim.policies.autoscale.queue_depth import QueueDepth
from herdsim.policies.autoscale.scaler import Autoscaler
from herdsim.policies.family import Family

FAMILY = Family("autoscaler metric", "autoscaler", "metric", (QueueDepth, BusyFraction))
Autoscale = FAMILY.union()

__all__ = ["FAMILY", "Autoscale", "Autoscaler", "BusyFraction", "QueueDepth"]

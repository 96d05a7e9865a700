"""The outage modes (``downstream.outages[i].mode``), one module each: :mod:`.down` (the
default), :mod:`.blackhole`, :mod:`.error` (``error_rate``), :mod:`.slow` (``factor``)
and :mod:`.flush` (empties the tier's cache). Each enters and leaves an
:class:`~herdsim.policies.outages.base.OutageState`, the pure bookkeeping the model's health and the
testbed's emulator keep. A new mode is a module here and one entry in :data:`FAMILY`.
"""

from __future__ import annotations

from herdsim.policies.family import Family
from herdsim.policies.outages.base import OutageState
from herdsim.policies.outages.blackhole import Blackhole
from herdsim.policies.outages.down import Down
from herdsim.policies.outages.error import Error
from herdsim.policies.outages.flush import Flush
from herdsim.policies.outages.slow import Slow

FAMILY = Family("outage mode", "outage", "mode", (Down, Blackhole, Error, Slow, Flush),
                default="down")
Outage = FAMILY.union()

__all__ = ["FAMILY", "Outage", "OutageState"]

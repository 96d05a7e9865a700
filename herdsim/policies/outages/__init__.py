"""The outage modes (``downstream.outages[i].mode``), one module each: :mod:`.down` (the
default), :mod:`.blackhole`, :mod:`.error` (``error_rate``) and :mod:`.slow` (``factor``).
Each enters and leaves an :class:`~herdsim.policies.outages.base.OutageState`, the pure
bookkeeping the model's health and the testbed's emulator keep. A new mode is a module
here and one entry in :data:`FAMILY`.
"""

from __future__ import annotations

from herdsim.policies.family import Family
from herdsim.policies.outages.base import OutageState
from herdsim.policies.outages.blackhole import Blackhole
from herdsim.policies.outages.down import Down
from herdsim.policies.outages.error import Error
from herdsim.policies.outages.slow import Slow

FAMILY = Family("outage mode", "outage", "mode", (Down, Blackhole, Error, Slow),
                default="down")
Outage = FAMILY.union()

__all__ = ["FAMILY", "Outage", "OutageState"]

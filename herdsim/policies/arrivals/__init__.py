"""The arrival sources (``workload.arrivals``), one module each: :mod:`.poisson` (the
default), :mod:`.constant`, :mod:`.burst` (``burst_size``) and :mod:`.trace`
(``trace``) and :mod:`.periodic` (``clients``, ``interval``, ``offset``,
``restarts``). Their tag and fields sit flat in ``workload`` beside the rate, a profile and
spikes (checked by :meth:`~herdsim.policies.family.Family.flat`); the model's arrival
clocks read ``poisson`` and ``jobs_per_arrival()``. A new source is a module here, one
entry in :data:`FAMILY` and in :data:`Name`.
"""

from __future__ import annotations

from typing import Literal

from herdsim.policies.arrivals.base import Source
from herdsim.policies.arrivals.burst import Burst
from herdsim.policies.arrivals.constant import Constant
from herdsim.policies.arrivals.periodic import Periodic
from herdsim.policies.arrivals.poisson import Poisson
from herdsim.policies.arrivals.trace import Trace, TraceFile
from herdsim.policies.family import Family

FAMILY = Family("arrival source", "arrival source", "arrivals",
                (Poisson, Constant, Burst, Trace, Periodic), default="poisson")
Name = Literal["poisson", "constant", "burst", "trace", "periodic"]  # FAMILY's tags (a test checks)

__all__ = ["FAMILY", "Burst", "Constant", "Name", "Periodic", "Poisson", "Source", "Trace",
           "TraceFile"]

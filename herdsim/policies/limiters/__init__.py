"""The admission family: limits on what a server admits at once, as pure objects (no
SimPy).

Every limiter answers one protocol, read by the downstream:

* ``limit_at(now)`` — the limit on calls admitted (in service plus waiting) at *now*;
* ``sample(now, start, inflight, dropped)`` — a call admitted at *start*, when *inflight*
  calls (itself included) were admitted, has left at *now*: served (``dropped`` False) or
  dropped without an answer (``dropped`` True).

One module per library algorithm, each holding the algorithm as the library ships it with
its defaults and its member config (``kind``, its own fields, ``build``): :mod:`.fixed`,
:mod:`.aimd`, :mod:`.vegas` and :mod:`.gradient2` (Netflix concurrency-limits, with
:mod:`.window` for its ``WindowedLimit``) and :mod:`.envoy` (Envoy's adaptive concurrency
gradient controller). A new algorithm is a module here and one entry in :data:`FAMILY`.
"""

from __future__ import annotations

from herdsim.policies.family import Family
from herdsim.policies.limiters.aimd import Aimd
from herdsim.policies.limiters.envoy import Envoy
from herdsim.policies.limiters.fixed import Fixed
from herdsim.policies.limiters.gradient2 import Gradient2
from herdsim.policies.limiters.vegas import Vegas

FAMILY = Family("admission limiter", "admission limiter", "kind",
                (Fixed, Aimd, Vegas, Gradient2, Envoy))
Admission = FAMILY.union()

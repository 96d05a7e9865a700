"""The retry budget family: may this job retry (or call) now? Pure objects, no SimPy.

One module per kind, each the algorithm and its member config (``kind``, its own fields,
``build(draw)``): :mod:`.token_bucket` (AWS SDK retry quota, gRPC retry throttling),
:mod:`.adaptive` (Google SRE client-side throttling), :mod:`.ratio` (Finagle's
RetryBudget) and :mod:`.cumulative_ratio` (the original retry simulator's retry breaker) and
:mod:`.envoy` (Envoy's circuit breakers and retry budget);
the protocol they answer and ``scope`` in :mod:`.base`.
"""

from __future__ import annotations

from herdsim.policies.budgets.adaptive import Adaptive
from herdsim.policies.budgets.cumulative_ratio import Cumulative
from herdsim.policies.budgets.envoy import Envoy
from herdsim.policies.budgets.ratio import Ratio
from herdsim.policies.budgets.token_bucket import TokenBucket
from herdsim.policies.family import Family

FAMILY = Family("retry budget", "retry budget", "kind",
                (TokenBucket, Adaptive, Ratio, Cumulative, Envoy))
Budget = FAMILY.union()

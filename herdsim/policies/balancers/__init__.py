"""The balancer family: how a tier with ``replicas`` picks the replica for a call. One
module per kind of rule (:mod:`.simple`: round robin, random, weighted;
:mod:`.least_request`; :mod:`.hashing`: ring hash, Maglev), the shared fields and the
``Picker`` protocol in :mod:`.base`; the hosts' health in :mod:`.outlier`."""

from __future__ import annotations

from herdsim.policies.balancers.base import MAX_REPLICAS, Balancer, in_panic
from herdsim.policies.balancers.hashing import Maglev, RingHash
from herdsim.policies.balancers.least_request import LeastRequest
from herdsim.policies.balancers.simple import Random, RoundRobin, Weighted
from herdsim.policies.family import Family

FAMILY = Family("balancer", "balancer", "kind",
                (RoundRobin, Random, LeastRequest, RingHash, Maglev, Weighted),
                default="round_robin")
BalancerChoice = FAMILY.union()

__all__ = ["FAMILY", "MAX_REPLICAS", "Balancer", "BalancerChoice", "in_panic"]

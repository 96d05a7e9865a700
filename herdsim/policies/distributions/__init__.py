"""The service distributions (``distribution`` of ``downstream.service``,
``network_delay`` and ``request_delay``), one module each: :mod:`.constant`,
:mod:`.exponential` (the default) and :mod:`.lognormal` (``sigma``). Each member's
``sampler(rng)`` is the rule the model and the testbed's emulator draw times with. A new
distribution is a module here and one entry in :data:`FAMILY`.
"""

from __future__ import annotations

from herdsim.policies.distributions.base import Sampler
from herdsim.policies.distributions.constant import Constant
from herdsim.policies.distributions.exponential import Exponential
from herdsim.policies.distributions.lognormal import Lognormal
from herdsim.policies.family import Family

FAMILY = Family("service distribution", "distribution", "distribution",
                (Constant, Exponential, Lognormal), default="exponential")
Distribution = FAMILY.union()

__all__ = ["FAMILY", "Distribution", "Exponential", "Sampler"]

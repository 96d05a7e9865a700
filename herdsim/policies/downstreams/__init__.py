"""The downstream models (``downstream.model``), one module each: :mod:`.queue` (the
default), :mod:`.occ` (with its ``occ`` fields) and :mod:`.broker` (its ``broker``
fields). Each declares what analysis, plots and the report need (``queueing``,
``done_when``); the engine maps each to its runner (herdsim/model/downstream/family.py).
The tag and the member's fields sit flat in ``downstream``, checked by
:meth:`~herdsim.policies.family.Family.flat`. A new model is a module here, one entry in
:data:`FAMILY` and in :data:`Name`, and its runner.
"""

from __future__ import annotations

from typing import Literal

from herdsim.policies.downstreams.base import Model
from herdsim.policies.downstreams.broker import Broker, BrokerFields
from herdsim.policies.downstreams.occ import Occ, OccFields
from herdsim.policies.downstreams.queue import Queue
from herdsim.policies.family import Family

FAMILY = Family("downstream model", "downstream", "model", (Queue, Occ, Broker),
                default="queue")
Name = Literal["queue", "occ", "broker"]  # the members' tags (a test checks them against FAMILY)


def named(name: str) -> type[Model]:
    """The member called *name* (a scenario's ``downstream.model``, a summary's ``model``)."""
    return FAMILY.member(name)  # type: ignore[return-value]


__all__ = ["FAMILY", "Broker", "BrokerFields", "Model", "Name", "Occ", "OccFields", "Queue",
           "named"]

"""The downstream models' engines: how to simulate a scenario of each member of
:mod:`herdsim.policies.downstreams` (what each declares to analysis and plots —
``queueing``, ``done_when`` — is the member's, read there).

A member's engine is a module with a function ``run(scenario, progress) -> Finished``,
loaded when a scenario of it first runs, as an entry point is: this module imports no
engine, so the engines may import it, and nothing that only asks what a model declares
loads SimPy. A new model is a member in ``policies/downstreams/`` and its engine here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from herdsim.config.scenario import Scenario
from herdsim.policies import downstreams

if TYPE_CHECKING:
    from herdsim.model.finished import Finished

Progress = Callable[[float, float], None]
"""``progress(now, duration)``: *now* simulated seconds of *duration* are done."""


@dataclass(frozen=True)
class DownstreamModel:
    """One member's engine, with the member's declarations."""

    name: str
    engine: str  # the module that runs it: ``run(scenario, progress) -> Finished``

    def run(self, scenario: Scenario, progress: Progress | None = None) -> Finished:
        """Run *scenario* once by this model's engine, reporting *progress*."""
        return importlib.import_module(self.engine).run(scenario, progress)

    @property
    def queueing(self) -> bool:
        """The member's: jobs offered at a rate to slots with a capacity, outages, a DLQ."""
        return downstreams.named(self.name).queueing

    @property
    def done_when(self) -> str | None:
        """The member's: a KPI of its own (``Finished.extra``), defined = recovered."""
        return downstreams.named(self.name).done_when


QUEUE = DownstreamModel("queue", "herdsim.model.simulation")
OCC = DownstreamModel("occ", "herdsim.model.downstream.occ")
BROKER = DownstreamModel("broker", "herdsim.model.downstream.broker")
MODELS = {m.name: m for m in (QUEUE, OCC, BROKER)}


def named(name: str) -> DownstreamModel:
    """The member called *name* (a summary's ``model``)."""
    return MODELS[name]


def of(scenario: Scenario) -> DownstreamModel:
    """The member *scenario*'s ``downstream.model`` names."""
    return MODELS[scenario.downstream.model]


def simulate(scenario: Scenario, progress: Progress | None = None) -> Finished:
    """Run *scenario* once through the model its downstream names, reporting *progress*
    (see :class:`~herdsim.model.simulation.Simulation`; ``occ`` reports only its end)."""
    return of(scenario).run(scenario, progress)

"""The downstream models' runners: how to simulate a scenario of each member of
:mod:`herdsim.policies.downstreams` (what each declares to analysis and plots —
``queueing``, ``done_when`` — is the member's). A new model is a member there and its
runner here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from herdsim.config.scenario import Scenario
from herdsim.model.downstream import occ
from herdsim.model.finished import Finished
from herdsim.model.simulation import Progress, Simulation
from herdsim.policies import downstreams


@dataclass(frozen=True)
class DownstreamModel:
    """One member's runner, with the member's declarations."""

    name: str
    run: Callable[[Scenario, Progress | None], Finished]

    @property
    def queueing(self) -> bool:
        """The member's: jobs offered at a rate to slots with a capacity, outages, a DLQ."""
        return downstreams.named(self.name).queueing

    @property
    def done_when(self) -> str | None:
        """The member's: a KPI of its own (``Finished.extra``), defined = recovered."""
        return downstreams.named(self.name).done_when


def _queue(scenario: Scenario, progress: Progress | None) -> Finished:
    return Simulation(scenario, progress).run()


def _occ(scenario: Scenario, progress: Progress | None) -> Finished:
    finished = occ.simulate(scenario)  # its own event loop: it reports only its end
    if progress is not None:
        progress(scenario.duration, scenario.duration)
    return finished


QUEUE = DownstreamModel("queue", _queue)
OCC = DownstreamModel("occ", _occ)
MODELS = {m.name: m for m in (QUEUE, OCC)}


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

"""The downstream models, as one family: what each one tells the rest of herdsim.

``downstream.model`` names a member. The rest of the package asks the member, never the
name: how to simulate a scenario, whether it serves offered load at a capacity (a
capacity line, an offered rate, goodput, rejections, a dead-letter queue to speak of),
and when a run of it counts as recovered. A new model is a new
member here, with the schema's ``Literal`` of names extended to match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from herdsim.config.scenario import Scenario
from herdsim.model.downstream import occ
from herdsim.model.finished import Finished
from herdsim.model.simulation import Progress, Simulation


@dataclass(frozen=True)
class DownstreamModel:
    """One member of the family."""

    name: str
    run: Callable[[Scenario, Progress | None], Finished]
    queueing: bool  # jobs offered at a rate to slots with a capacity, outages, a DLQ
    done_when: str | None = None  # a KPI of its own (``Finished.extra``): defined = recovered

    def capacity_rate(self, scenario: Scenario) -> float | None:
        """Calls/s its downstream can serve (None: the model has no service rate)."""
        return scenario.downstream.capacity_rate() if self.queueing else None


def _queue(scenario: Scenario, progress: Progress | None) -> Finished:
    return Simulation(scenario, progress).run()


def _occ(scenario: Scenario, progress: Progress | None) -> Finished:
    finished = occ.simulate(scenario)  # its own event loop: it reports only its end
    if progress is not None:
        progress(scenario.duration, scenario.duration)
    return finished


QUEUE = DownstreamModel("queue", _queue, queueing=True)
OCC = DownstreamModel("occ", _occ, queueing=False, done_when="completion_time")
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

"""The downstream models, as one family: what each one tells the rest of herdsim.

``downstream.model`` names a member. The rest of the package asks the member, never the
name: how to simulate a scenario, whether it serves offered load at a capacity (a
capacity line, an offered rate, goodput, rejections, a dead-letter queue to speak of),
and when a run of it counts as recovered. A new model is a new member here, with the
schema's ``Literal`` of names extended to match, and a module with its ``run``.

A member names the module that runs it (its ``engine``, with a function
``run(scenario, progress) -> Finished``), loaded when a scenario of it first runs, as an
entry point is: the family imports no engine, so the engines may import the family, and
what reads only a member's declarations (analysis, plots) loads no SimPy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from herdsim.config.scenario import Scenario

if TYPE_CHECKING:
    from herdsim.model.finished import Finished

Progress = Callable[[float, float], None]
"""``progress(now, duration)``: *now* simulated seconds of *duration* are done."""


@dataclass(frozen=True)
class DownstreamModel:
    """One member of the family."""

    name: str
    engine: str  # the module that runs it: ``run(scenario, progress) -> Finished``
    queueing: bool  # jobs offered at a rate to slots with a capacity, outages, a DLQ
    done_when: str | None = None  # a KPI of its own (``Finished.extra``): defined = recovered

    def run(self, scenario: Scenario, progress: Progress | None = None) -> Finished:
        """Run *scenario* once by this model's engine, reporting *progress*."""
        return importlib.import_module(self.engine).run(scenario, progress)

    def capacity_rate(self, scenario: Scenario) -> float | None:
        """Calls/s its downstream can serve (None: the model has no service rate)."""
        return scenario.downstream.capacity_rate() if self.queueing else None


QUEUE = DownstreamModel("queue", "herdsim.model.simulation", queueing=True)
OCC = DownstreamModel("occ", "herdsim.model.downstream.occ", queueing=False,
                      done_when="completion_time")
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

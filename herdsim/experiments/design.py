"""The experiment design's one rule: replication ``r`` of anything runs with seed
``seed + r``, in every arm, cell and point alike (common random numbers)."""

from __future__ import annotations

from typing import Any

from herdsim.config.scenario import Scenario


def replication_seed(seed: int, replication: int) -> int:
    """The seed of replication *replication* of a scenario seeded *seed*."""
    return seed + replication


def seeded(scenario: Scenario, replication: int) -> Scenario:
    """*scenario* as replication *replication* runs it."""
    return scenario.model_copy(update={"seed": replication_seed(scenario.seed, replication)})


def seeded_data(data: dict[str, Any], replication: int) -> dict[str, Any]:
    """A scenario document (a dict) as replication *replication* runs it."""
    return {**data, "seed": replication_seed(data["seed"], replication)}

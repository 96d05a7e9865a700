"""What a model hands on when a run ends: the raw record, before any analysis."""

from __future__ import annotations

from dataclasses import dataclass, field

from herdsim.config.scenario import Scenario
from herdsim.model.recorder import Recorder
from herdsim.model.workload import Job


@dataclass
class Finished:
    """A finished run, before analysis: the recorder's arrays and what the model knows."""

    scenario: Scenario
    recorder: Recorder
    n_bins: int
    pending: list[Job]  # jobs still in the system, less those queued as they arrived
    wall: float
    breaker_trips: int = 0
    breaker_open_time: float = 0.0  # mean time one breaker spent not closed (s)
    extra: dict = field(default_factory=dict)  # model-specific KPIs (occ)
    tiers: dict = field(default_factory=dict)  # a call graph's TierRecords, by name
    fleets: dict = field(default_factory=dict)  # the tiers with replicas: Fleets, by name

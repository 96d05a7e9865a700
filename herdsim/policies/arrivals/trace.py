"""``arrivals: trace``: the times of a recorded trace (``workload.trace``); its mean
rate over the run is the workload's rate (filled on load)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.arrivals.base import Source
from herdsim.policies.fields import NonNegativeDuration, Section


class TraceFile(Section):
    """Recorded arrivals: every job arrives at a time of the file (× time_scale, + start)."""

    file: str = Field(min_length=1, description="path, relative to the scenario file")
    format: Literal["csv", "osdi"] = Field(
        "csv", description="csv: a time column in seconds; osdi: the OSDI'22 metastability "
                           "artifact's whitespace lines (arrival_s request_type size key)")
    time_scale: float = Field(1.0, gt=0, description="multiplies every time of the file")
    start: NonNegativeDuration = Field(0.0, description="added to every (scaled) time")
    sha256: str | None = Field(None, description="the file's SHA-256, filled on load; a "
                                                 "different file is refused")


class Trace(Source):
    """``arrivals: trace``."""

    arrivals: Literal["trace"]
    trace: TraceFile = Field(description="arrivals: trace reads arrivals from here")
    about: ClassVar[str] = "the times of a recorded trace (csv or the OSDI'22 artifact's)"
    fluid: ClassVar[str | None] = "the trace's arrivals counted per slot"
    knob: ClassVar[str] = "trace fewer arrivals (workload.trace)"

"""The KPI registry: every summary number's key, label, unit, format, better direction and
one-line meaning. CLI tables, figures, the report and the docs test all read it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class KPI:
    """One summary number."""

    key: str
    label: str
    unit: str = ""
    kind: Literal["count", "real", "text"] = "real"
    better: Literal["higher", "lower", None] = None
    meaning: str = ""
    optional: bool = False  # shown in the run table only when nonzero


REGISTRY: tuple[KPI, ...] = (
    KPI("scenario", "scenario", kind="text", meaning="the scenario's name"),
    KPI("strategy", "retry strategy", kind="text", meaning="the retry strategy of the run"),
    KPI("seed", "seed", kind="count", meaning="the seed of every random stream"),
    KPI("outages", "outages", kind="count", meaning="injected outages"),
    KPI("jobs_submitted", "jobs submitted", kind="count",
        meaning="jobs that arrived (refused ones excluded)"),
    KPI("jobs_succeeded", "succeeded", kind="count", better="higher",
        meaning="jobs whose call succeeded"),
    KPI("jobs_dead_lettered", "dead-lettered", kind="count", better="lower",
        meaning="jobs that ended in the dead-letter queue"),
    KPI("jobs_pending", "pending at the end", kind="count", better="lower",
        meaning="jobs still queued, parked or in hand when the run stopped"),
    KPI("jobs_refused", "refused (queue full)", kind="count", better="lower", optional=True,
        meaning="arrivals refused by a full main queue"),
    KPI("attempts_total", "downstream calls", kind="count",
        meaning="calls made to the downstream, first tries and retries"),
    KPI("retries_total", "retries", kind="count", meaning="retry sleeps drawn"),
    KPI("amplification", "amplification", "calls/job", better="lower",
        meaning="downstream calls per submitted job"),
    KPI("rejected_total", "calls rejected at once", kind="count", optional=True,
        meaning="calls failed fast: down, waiting room full, rate limited"),
    KPI("timeouts_total", "client timeouts", kind="count", optional=True,
        meaning="calls the client gave up on"),
    KPI("errors_total", "error responses", kind="count", optional=True,
        meaning="calls answered with an error"),
    KPI("wasted_total", "wasted (served after timeout)", kind="count", optional=True,
        meaning="calls served after their client had gone"),
    KPI("recycled_total", "recycled (no DLQ)", kind="count", optional=True,
        meaning="failed jobs put back on the main queue (DLQ off)"),
    KPI("calls_avoided", "calls short-circuited", kind="count", optional=True,
        meaning="calls a circuit breaker refused"),
    KPI("budget_refused_total", "retries refused by budget", kind="count", optional=True,
        meaning="retries a retry budget or throttle refused"),
    KPI("breaker_trips", "breaker trips", kind="count", optional=True,
        meaning="times a circuit breaker opened"),
    KPI("breaker_open_time", "breaker open time", "s", optional=True,
        meaning="mean time one breaker spent not closed"),
    KPI("capacity_rate", "downstream capacity", "calls/s",
        meaning="calls per second the healthy downstream serves"),
    KPI("peak_attempt_rate", "peak call rate", "calls/s", better="lower",
        meaning="calls per second in the busiest peak_window"),
    KPI("peak_to_capacity", "peak / capacity", "×", better="lower",
        meaning="peak call rate over capacity"),
    KPI("retry_peak_to_mean", "retry peak / mean", "×", better="lower",
        meaning="busiest bin of retries over their mean during the storm"),
    KPI("collapses", "collapses (crashes)", kind="count", better="lower",
        meaning="times the overloaded downstream crashed"),
    KPI("collapses_after_outage", "collapses after the outage", kind="count", better="lower",
        meaning="crashes after the last outage ended"),
    KPI("recovery_time", "recovery time", "s", better="lower",
        meaning="seconds from the last outage's end until healthy for good"),
    KPI("latency_p50", "latency p50", "s", better="lower",
        meaning="median arrival-to-success time (pending jobs at their age)"),
    KPI("latency_p99", "latency p99", "s", better="lower",
        meaning="99th percentile arrival-to-success time (pending jobs at their age)"),
    KPI("completion_time", "completion time", "s", better="lower", optional=True,
        meaning="occ: when the last client finished"),
    KPI("conflicts", "conflicts", kind="count", better="lower", optional=True,
        meaning="occ: writes that lost a version check"),
    KPI("wall_seconds", "wall time", "s", meaning="wall-clock seconds the simulation took"),
    KPI("calls_per_wall_second", "calls per wall second", "calls/s",
        meaning="simulation speed"),
)
BY_KEY = {kpi.key: kpi for kpi in REGISTRY}

RUN_TABLE = ("jobs_submitted", "jobs_succeeded", "jobs_dead_lettered", "jobs_pending",
             "attempts_total", "amplification", "capacity_rate", "peak_attempt_rate",
             "peak_to_capacity", "retry_peak_to_mean", "collapses", "collapses_after_outage",
             "rejected_total", "timeouts_total", "errors_total", "wasted_total",
             "recycled_total", "calls_avoided", "budget_refused_total", "completion_time",
             "conflicts", "recovery_time", "latency_p50", "latency_p99", "wall_seconds")
COMPARE_TABLE = {  # key -> short column heading of the ranked table
    "peak_to_capacity": "peak/cap ×", "amplification": "calls/job",
    "recovery_time": "recovery s", "jobs_succeeded": "succeeded",
    "jobs_dead_lettered": "DLQ", "jobs_pending": "pending",
    "collapses_after_outage": "crashes after", "latency_p99": "p99 s",
}
FIGURE = {  # key -> (panel title, axis label) of the KPI figure
    "peak_to_capacity": ("Peak call rate", "× capacity (busiest {window})"),
    "amplification": ("Amplification", "downstream calls per job"),
    "recovery_time": ("Recovery time", "s after the outage ends"),
    "jobs_dead_lettered": ("Dead-lettered", "jobs"),
    "latency_p99": ("Latency p99", "s (succeeded jobs)"),
}


def number_text(value: float) -> str:
    """``14.7``, ``0.00312``, ``1,234``: three significant digits, thousands grouped."""
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def format_value(value: Any, missing: str = "—") -> str:
    """A summary value for a table: ints grouped, floats to 3 digits, *missing* if None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        return number_text(float(value))
    return str(value)


def format_kpi(mean: float, ci: float = np.nan, missing: str = "—") -> str:
    """A KPI mean for a table: ``14.7``, ``14.7 ±0.31``, or *missing* when undefined."""
    if pd.isna(mean):
        return missing
    return number_text(mean) if pd.isna(ci) else f"{number_text(mean)} ±{number_text(ci)}"

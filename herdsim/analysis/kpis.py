"""The KPI registry: every summary number's key, label, unit, format, better direction and
one-line meaning. CLI tables, figures, the report and the docs test all read it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

Kind = Literal["count", "real", "fraction", "flag", "text"]
STATES = ("recovered", "degraded", "metastable")  # the metastability classes, best first
NOT_RECOVERED = "not recovered within the run"  # a recovery_time that is undefined
STATE_MEANING = {  # one vocabulary for tables, figures, the map and the report
    "recovered": "recovered within the run, about as fast as a smooth queue drains",
    "degraded": "recovered slowly, or still working off its backlog when the run ended",
    "metastable": "not recovered within the run: collapsing again, or serving under half "
                  "of the offered jobs",
}
NA = "n/a"


@dataclass(frozen=True)
class KPI:
    """One summary number: ``kind`` says how to show it (count: a whole number; fraction:
    a percentage; flag: yes/no), ``better`` which way is good, ``missing`` what an
    undefined value means (shown after "n/a")."""

    key: str
    label: str
    unit: str = ""
    kind: Kind = "real"
    better: Literal["higher", "lower", None] = None
    meaning: str = ""
    optional: bool = False  # shown in the run table only when nonzero
    missing: str = ""


REGISTRY: tuple[KPI, ...] = (
    KPI("scenario", "scenario", kind="text", meaning="the scenario's name"),
    KPI("strategy", "retry strategy", kind="text", meaning="the retry strategy of the run"),
    KPI("model", "downstream model", kind="text", meaning="queue or occ"),
    KPI("seed", "seed", kind="count", meaning="the seed of every random stream"),
    KPI("state", "state", kind="text",
        meaning="recovered, degraded or metastable: the sweep's classifier on this run"),
    KPI("succeeded_fraction", "succeeded fraction", "of submitted", "fraction", "higher",
        "jobs that succeeded over jobs submitted", missing="no job submitted"),
    KPI("goodput", "goodput", "× offered", better="higher",
        meaning="successes per second after the last outage (whole run without one) over "
                "the offered rate of jobs that can succeed; above 1 while a backlog drains",
        missing="no offered rate"),
    KPI("outages", "outages", kind="count", meaning="injected outages"),
    KPI("jobs_submitted", "jobs submitted", kind="count",
        meaning="jobs that arrived (refused ones excluded)"),
    KPI("jobs_succeeded", "jobs succeeded", kind="count", better="higher",
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
    KPI("amplification", "amplification", "calls/succeeded job", better="lower",
        meaning="downstream calls per succeeded job: work burnt without success counts",
        missing="no job succeeded"),
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
    KPI("shed_admission_total", "shed by the admission limit", kind="count", optional=True,
        meaning="calls the downstream's admission limit refused (only with admission)"),
    KPI("shed_shedding_total", "shed at random", kind="count", optional=True,
        meaning="calls probabilistic shedding refused (only with shedding)"),
    KPI("shed_codel_total", "shed by CoDel", kind="count", optional=True,
        meaning="waiting calls CoDel rejected instead of serving (only with codel)"),
    KPI("breaker_trips", "breaker trips", kind="count", optional=True,
        meaning="times a circuit breaker opened"),
    KPI("breaker_open_time", "breaker open time", "s", optional=True,
        meaning="mean time one breaker spent not closed"),
    KPI("capacity_rate", "downstream capacity", "calls/s",
        meaning="calls per second the healthy downstream serves",
        missing="unbounded, or no service rate (occ)"),
    KPI("peak_attempt_rate", "peak call rate", "calls/s", better="lower",
        meaning="calls per second in the busiest peak_window"),
    KPI("peak_to_capacity", "peak / capacity", "×", better="lower",
        meaning="peak call rate over capacity", missing="no bounded capacity"),
    KPI("peak_to_baseline", "peak / pre-outage peak", "×", better="lower",
        meaning="busiest peak_window from the first outage on over the busiest before it",
        missing="no pre-outage period"),
    KPI("retry_peak_to_mean", "retry peak / mean", "×", better="lower",
        meaning="busiest bin of retries over their mean during the storm",
        missing="no retry storm"),
    KPI("collapses", "collapses (crashes)", kind="count", better="lower",
        meaning="times the overloaded downstream crashed"),
    KPI("collapses_after_outage", "collapses after the outage", kind="count", better="lower",
        meaning="crashes after the last outage ended"),
    KPI("recovery_time", "recovery time", "s", better="lower",
        meaning="seconds from the last outage's end until healthy for good",
        missing=NOT_RECOVERED),
    KPI("latency_p50", "latency p50", "s", better="lower",
        meaning="median time to success or dead letter over every submitted job, pending "
                "ones at their age (≥: a lower bound)", missing="no job"),
    KPI("latency_p99", "latency p99", "s", better="lower",
        meaning="99th percentile of the same (≥: a lower bound)", missing="no job"),
    KPI("pending_age_max", "oldest pending job", "s",
        meaning="age of the oldest job still pending when the run stopped",
        missing="none pending"),
    KPI("latency_censored", "latency is a lower bound", kind="flag",
        meaning="the oldest pending job's age reaches a reported quantile (≥ p50)"),
    KPI("completion_time", "completion time", "s", better="lower",
        meaning="occ: when the last client finished", missing="not every client succeeded"),
    KPI("conflicts", "conflicts", kind="count", better="lower",
        meaning="occ: writes that lost a version check"),
    KPI("wall_seconds", "wall time", "s", meaning="wall-clock seconds the simulation took"),
    KPI("calls_per_wall_second", "calls per wall second", "calls/s",
        meaning="simulation speed"),
    # herdsim testbed only: how late its real processes were (docs/validation.md)
    KPI("lateness_p99_ms", "lateness p99 (worst kind)", "ms", better="lower",
        meaning="testbed: the largest of the timer, event-loop and producer p99 lateness"),
    KPI("lateness_timer_p99_ms", "timer overshoot p99", "ms", better="lower",
        meaning="testbed: how late retry sleeps, polls, outages and service timers woke"),
    KPI("lateness_loop_p99_ms", "event-loop lag p99", "ms", better="lower",
        meaning="testbed: how much longer than asked a 10 ms probe sleep took"),
    KPI("lateness_producer_p99_ms", "producer drift p99", "ms", better="lower",
        meaning="testbed: how long after its arrival time a job was pushed"),
    KPI("lateness_max_ms", "lateness max", "ms", better="lower",
        meaning="testbed: the latest wake of any kind"),
    KPI("lateness_bound_ms", "lateness bound", "ms",
        meaning="testbed: the p99 lateness a valid run stays within"),
    KPI("testbed_valid", "valid (kept up)", kind="flag", better="higher",
        meaning="testbed: every kind of lateness stayed within the bound at p99"),
    KPI("testbed_invalid_reason", "invalid because", kind="text", optional=True,
        meaning="testbed: which lateness exceeded the bound"),
    KPI("testbed_processes", "worker processes", kind="count",
        meaning="testbed: processes the workers were spread over"),
    KPI("testbed_unaccounted_jobs", "jobs unaccounted for", kind="count", better="lower",
        meaning="testbed: jobs found in no place or in two (succeeded, dead-lettered, "
                "queued, parked, in a worker's hand); 0 in a sound run"),
)
BY_KEY = {kpi.key: kpi for kpi in REGISTRY}

RUN_TABLE = ("state", "succeeded_fraction", "goodput", "jobs_submitted", "jobs_succeeded",
             "jobs_dead_lettered", "jobs_pending", "attempts_total", "amplification",
             "capacity_rate", "peak_attempt_rate", "peak_to_capacity", "peak_to_baseline",
             "retry_peak_to_mean", "collapses", "collapses_after_outage", "rejected_total",
             "timeouts_total", "errors_total", "wasted_total", "recycled_total",
             "calls_avoided", "budget_refused_total", "shed_admission_total",
             "shed_shedding_total", "shed_codel_total", "completion_time", "conflicts",
             "recovery_time", "latency_p50", "latency_p99", "wall_seconds",
             "lateness_p99_ms", "lateness_timer_p99_ms", "lateness_loop_p99_ms",
             "lateness_producer_p99_ms", "lateness_max_ms", "testbed_valid",
             "testbed_unaccounted_jobs")
COMPARE_TABLE = {  # key -> short column heading of the ranked table
    "state": "state", "succeeded_fraction": "succeeded %", "goodput": "goodput ×offered",
    "recovery_time": "recovery s", "peak_to_baseline": "peak/pre ×",
    "peak_to_capacity": "peak/cap ×", "amplification": "calls/success",
    "jobs_dead_lettered": "DLQ", "jobs_pending": "pending",
    "collapses_after_outage": "crashes after", "latency_p99": "p99 s",
}
FIGURE = {  # key -> (panel title, axis label) of the KPI figure
    "peak_to_capacity": ("Peak call rate", "× capacity (busiest {window})"),
    "amplification": ("Amplification", "downstream calls per succeeded job"),
    "recovery_time": ("Recovery time", "s after the outage ends"),
    "jobs_dead_lettered": ("Dead-lettered", "jobs"),
    "latency_p99": ("Latency p99", "s (every job; pending ones at their age)"),
}


def number_text(value: float) -> str:
    """``14.7``, ``0.00312``, ``1,234``: three significant digits, thousands grouped."""
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def format_value(value: Any, missing: str = NA) -> str:
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


def format_kpi(mean: float, ci: float = np.nan, missing: str = NA) -> str:
    """A KPI mean for a table: ``14.7``, ``14.7 ±0.31``, or *missing* when undefined."""
    if pd.isna(mean):
        return missing
    return number_text(mean) if pd.isna(ci) else f"{number_text(mean)} ±{number_text(ci)}"


def undefined(value: Any) -> bool:
    """None, NaN or pandas' NA: a KPI with no value."""
    if value is None:
        return True
    return not isinstance(value, str) and bool(pd.isna(value))


def missing_text(key: str, summary: dict | None = None) -> str:
    """What an undefined KPI *key* means: ``not recovered within the run``, or ``n/a``
    with the registry's reason (``n/a (no outage)`` for a recovery with no outage)."""
    kpi = BY_KEY.get(key)
    if key in ("recovery_time", "peak_to_baseline") and summary is not None \
            and not summary.get("outages"):
        return f"{NA} (no outage)"
    if key == "recovery_time":
        return NOT_RECOVERED
    if key == "capacity_rate" and summary is not None and summary.get("model") == "occ":
        return f"{NA} (occ: no service rate)"
    if key == "capacity_rate" and summary is not None:
        return f"{NA} (unbounded)"
    return f"{NA} ({kpi.missing})" if kpi is not None and kpi.missing else NA


def show(key: str, value: Any, summary: dict | None = None, ci: float = np.nan) -> str:
    """KPI *key*'s *value* (a mean, ± *ci* when given) as every table shows it: counts
    grouped, fractions as percentages, ``≥`` on latency quantiles that are lower bounds,
    ``n/a (why)`` or ``not recovered within the run`` when undefined."""
    if undefined(value):
        return missing_text(key, summary)
    kpi = BY_KEY.get(key)
    kind = kpi.kind if kpi is not None else "real"
    if kind == "text" or isinstance(value, str):
        return str(value)
    if kind == "flag" or isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if kind == "fraction":
        text = percent(float(value))
        return text if undefined(ci) else f"{text} ±{percent(float(ci))}"
    if kind == "count" and float(value).is_integer() and undefined(ci):
        text = f"{int(value):,}"
    else:
        text = format_kpi(float(value), ci)
    bound = key.startswith("latency_p") and summary is not None and lower_bound(summary, key)
    return f"≥ {text}" if bound else text


def lower_bound(summary: dict, key: str) -> bool:
    """Whether the latency quantile *key* is only a lower bound: ``latency_censored`` and
    the oldest pending job (``pending_age_max``) at least as old as the quantile."""
    oldest, value = summary.get("pending_age_max"), summary.get(key)
    return bool(summary.get("latency_censored")) and not undefined(oldest) \
        and not undefined(value) and float(oldest) >= float(value)


def percent(value: float) -> str:
    """``0.117`` -> ``11.7%``; never rounds a fraction below 1 up to ``100%``."""
    text = f"{100 * value:.1f}%"
    if text == "100.0%" and value < 1:
        text = f"{100 * value:.3f}%"
    return text

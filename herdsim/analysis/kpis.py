"""The KPI registry: every summary number's key, label, unit, format, better direction and
one-line meaning. CLI tables, figures, the report and the docs test all read it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from herdsim.analysis.metastability import CLASSES, NOT_RECOVERED
from herdsim.policies import downstreams
from herdsim.policies.durations import format_duration

Kind = Literal["count", "real", "fraction", "flag", "text"]
STATES = CLASSES  # the metastability classes, best first
STATE_MEANING = {  # one vocabulary for tables, figures, the map and the report
    "recovered": "recovered within the run, about as fast as a smooth queue drains, "
                 "serving at least half of the offered jobs at the end",
    "degraded": "recovered slowly or to a state serving under half of the offered jobs, "
                "or still working off its backlog when the run ended",
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

    def title(self, summary: dict | None = None) -> str:
        """The label with the peak window filled in: ``peak calls in 10ms``."""
        return self.label.replace("{window}", window_text(summary))

    def about(self, summary: dict | None = None) -> str:
        """The meaning with the peak window filled in."""
        return self.meaning.replace("{window}", window_text(summary))

    def definition(self, summary: dict | None = None) -> str:
        """``label (unit): meaning``, the window filled in: what the CLI's definitions,
        ``herdsim kpis``, a failed ``--fail-if`` and the report's glossary print."""
        unit = f" ({self.unit})" if self.unit and self.kind != "fraction" else ""
        meaning = self.about(summary)
        return f"{self.title(summary)}{unit}: {meaning}" if meaning else self.title(summary)


def window_text(summary: dict | None = None) -> str:
    """The peak window of *summary* as a duration (``10ms``), else ``peak_window``."""
    window = (summary or {}).get("peak_window")
    if window is None or undefined(window):
        return "peak_window"
    return format_duration(float(window))


REGISTRY: tuple[KPI, ...] = (
    KPI("scenario", "scenario", kind="text", meaning="the scenario's name"),
    KPI("strategy", "retry strategy", kind="text", meaning="the retry strategy of the run"),
    KPI("model", "downstream model", kind="text", meaning="queue or occ"),
    KPI("seed", "seed", kind="count", meaning="the seed of every random stream"),
    KPI("state", "state", kind="text",
        meaning="recovered, degraded or metastable: the sweep's classifier on this run"),
    KPI("headline_tier", "headline tier", kind="text", optional=True,
        meaning="a call graph's tier in most trouble, whose state, capacity, peaks, "
                "collapses and recovery the summary's headline keys are: the worst state "
                "(metastable, degraded, recovered), then the most collapses, then the "
                "highest peak over capacity, then the tier nearest the workers"),
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
    KPI("jobs_merged", "merged into their key", kind="count", optional=True,
        meaning="jobs that collapsed into a job of the same key already queued, held or "
                "waiting to retry (workload.keys: client-go's workqueue); not in the "
                "latency KPIs"),
    KPI("jobs_refused", "refused (queue full)", kind="count", better="lower", optional=True,
        meaning="arrivals refused by a full main queue"),
    KPI("attempts_total", "downstream calls", kind="count",
        meaning="calls made to the downstream, first tries and retries"),
    KPI("retries_total", "retries", kind="count", meaning="retry sleeps drawn"),
    KPI("amplification", "calls per success", "calls/succeeded job", better="lower",
        meaning="downstream calls per succeeded job: work burnt without success counts; "
                "read it beside calls_per_calling_job (a job that never got to call "
                "costs nothing here but is no success either)",
        missing="no job succeeded"),
    KPI("calls_per_calling_job", "calls per calling job", "calls/job", better="lower",
        meaning="downstream calls per job that made at least one call: how hard each job "
                "that reached the downstream hammered it",
        missing="no job made a call"),
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
    KPI("peak_window", "peak window", "s",
        meaning="the short window every peak is measured on (the scenario's peak_window)"),
    KPI("peak_calls", "peak calls in {window}", "calls", kind="count", better="lower",
        meaning="downstream calls in the busiest window of width peak_window (a sliding "
                "window anchored at each call, so no bin edge splits a spike): every peak "
                "is stated in the window it was measured in"),
    KPI("peak_attempt_rate", "peak calls in {window}, scaled to a second", "calls/s",
        meaning="peak_calls / peak_window, kept in summary.json for older readers and "
                "PromQL rate() comparisons; no table shows it: it is calls in "
                "{window} scaled up, not calls made in any whole second (2,880 calls in "
                "10 ms read 288,000 calls/s in a run of 199,769 calls)"),
    KPI("peak_to_capacity", "peak in {window} / capacity", "×", better="lower",
        meaning="peak_calls over the calls the healthy downstream serves in one "
                "peak_window (capacity_rate × peak_window)", missing="no bounded capacity"),
    KPI("peak_to_baseline", "peak in {window} / pre-outage peak", "×", better="lower",
        meaning="busiest peak_window from the first outage on over the busiest before it",
        missing="no pre-outage period"),
    KPI("retry_peak_to_mean", "retry peak / mean (storm shape)", "×",
        meaning="busiest bin of retries over their mean during the storm: describes the "
                "storm's shape and ranks nothing, so no table shows it (a storm that never "
                "ends has a high mean and reads smooth: outage.yaml, fixed 6.7 against "
                "full jitter 9.7); compare arms on peak_to_capacity instead",
        missing="no retry storm"),
    KPI("collapses", "collapses (crashes)", kind="count", better="lower",
        meaning="times the overloaded downstream crashed"),
    KPI("collapses_after_outage", "collapses after the outage", kind="count", better="lower",
        meaning="crashes after the last outage ended"),
    KPI("recovery_time", "recovery time", "s", better="lower",
        meaning="seconds from the last outage's end until healthy for good",
        missing=NOT_RECOVERED),
    KPI("latency_p50", "latency p50", "s", better="lower",
        meaning="median time to success or dead letter over every submitted job, an order "
                "statistic; jobs still pending count at their age, so this is a lower "
                "bound: shown exact when it meets latency_p50_upper, else 'lo–hi', or "
                "'≥ lo' when unbounded", missing="no job"),
    KPI("latency_p50_upper", "latency p50 upper bound", "s",
        meaning="the same quantile with pending jobs at +∞ (its upper bound)",
        missing="unbounded: half the jobs or more were pending"),
    KPI("latency_p99", "latency p99", "s", better="lower",
        meaning="99th percentile of the same, shown the same way", missing="no job"),
    KPI("latency_p99_upper", "latency p99 upper bound", "s",
        meaning="the same quantile with pending jobs at +∞ (its upper bound)",
        missing="unbounded: 1% of the jobs or more were pending"),
    KPI("latency_succeeded_p50", "latency p50 of successes", "s", better="lower",
        meaning="median time to success over the jobs that succeeded (exact)",
        missing="no job succeeded"),
    KPI("latency_succeeded_p99", "latency p99 of successes", "s", better="lower",
        meaning="99th percentile of the same (exact; read it beside the succeeded share)",
        missing="no job succeeded"),
    KPI("pending_age_max", "oldest pending job", "s",
        meaning="age of the oldest job still pending when the run stopped",
        missing="none pending"),
    KPI("latency_censored", "latency is a range", kind="flag",
        meaning="pending jobs leave a reported latency quantile between two bounds "
                "(latency_pXX and latency_pXX_upper differ)"),
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
# A call graph's per-tier numbers: summary.json's ``tiers.<service>.<key>``.
TIER_REGISTRY: tuple[KPI, ...] = (
    KPI("state", "state", kind="text",
        meaning="recovered, degraded or metastable: the classifier on the tier's own "
                "numbers (the top tier: the run's state; docs/model.md, call graphs)"),
    KPI("calls", "calls", kind="count",
        meaning="calls that reached the tier: every attempt of every caller, hedge "
                "copies included"),
    KPI("succeeded_calls", "succeeded", kind="count", better="higher",
        meaning="calls the tier answered with a success its caller received"),
    KPI("failed_calls", "failed", kind="count", better="lower",
        meaning="calls that failed: refused at once, an error (its own or a "
                "dependency's), the caller's timeout, or failed at t0"),
    KPI("wasted_calls", "wasted", kind="count", better="lower",
        meaning="calls the tier finished serving after its caller had given up"),
    KPI("collapses", "collapses", kind="count", better="lower",
        meaning="times the tier crashed (overload.collapse)"),
    KPI("peak_to_capacity", "peak / capacity", "×", better="lower",
        meaning="the tier's busiest peak_window of calls over its capacity "
                "(concurrency / mean service time, or its rate limit)"),
    KPI("amplification", "calls per success", "calls/succeeded job", better="lower",
        meaning="calls at the tier per job the workers finished with success",
        missing="no job succeeded"),
    KPI("recovery_time", "recovery", "s", better="lower",
        meaning="seconds from the last outage's end until the tier is healthy for good",
        missing=NOT_RECOVERED),
    KPI("collapses_after_outage", "collapses after the outage", kind="count",
        better="lower", meaning="the tier's crashes after the last outage ended"),
    KPI("peak_calls", "peak calls", kind="count", better="lower",
        meaning="calls reaching the tier in its busiest peak_window"),
    KPI("capacity_rate", "capacity", "calls/s",
        meaning="calls per second the healthy tier serves"),
    KPI("peak_to_baseline", "peak / pre-outage peak", "×", better="lower",
        meaning="the tier's busiest peak_window from the first outage on over the busiest "
                "before it", missing="no pre-outage period"),
)
TIER_BY_KEY = {kpi.key: kpi for kpi in TIER_REGISTRY}

RUN_TABLE = ("state", "succeeded_fraction", "goodput", "jobs_submitted", "jobs_succeeded",
             "jobs_dead_lettered", "jobs_pending", "jobs_merged", "attempts_total",
             "amplification", "calls_per_calling_job", "capacity_rate", "peak_calls",
             "peak_to_capacity", "peak_to_baseline", "collapses", "collapses_after_outage",
             "rejected_total",
             "timeouts_total", "errors_total", "wasted_total", "recycled_total",
             "calls_avoided", "budget_refused_total", "shed_admission_total",
             "shed_shedding_total", "shed_codel_total", "completion_time", "conflicts",
             "recovery_time", "latency_p50", "latency_p99", "latency_succeeded_p50",
             "latency_succeeded_p99", "wall_seconds",
             "lateness_p99_ms", "lateness_timer_p99_ms", "lateness_loop_p99_ms",
             "lateness_producer_p99_ms", "lateness_max_ms", "testbed_valid",
             "testbed_unaccounted_jobs")
COMPARE_TABLE = {  # key -> short column heading of the ranked table
    "state": "state", "headline_tier": "tier", "succeeded_fraction": "succeeded %",
    "goodput": "goodput ×offered",
    "recovery_time": "recovery s", "peak_to_baseline": "{window} peak/pre ×",
    "peak_to_capacity": "{window} peak/cap ×", "amplification": "calls/success",
    "jobs_dead_lettered": "DLQ", "jobs_pending": "pending",
    "collapses_after_outage": "crashes after", "latency_p99": "p99 s",
}
DEFENCE_COLUMNS = {  # key -> heading: in the ranked table after calls/success when an arm's
    # defence acted (nonzero in some arm)
    "calls_avoided": "breaker refused", "budget_refused_total": "budget refused",
    "shed_admission_total": "shed admission", "shed_shedding_total": "shed random",
    "shed_codel_total": "shed CoDel",
}
REPORT_TABLE = (  # the report's per-arm table, after the arm and its state
    "succeeded_fraction", "goodput", "recovery_time", "peak_to_capacity", "peak_to_baseline",
    "peak_calls", "amplification", "calls_per_calling_job", "jobs_dead_lettered",
    "jobs_pending", "collapses_after_outage", "latency_p99", "latency_succeeded_p99")
FIGURE = {  # key -> (panel title, axis label) of the KPI figure
    "peak_to_capacity": ("Peak calls in {window}", "× what capacity serves in {window}"),
    "amplification": ("Calls per success", "downstream calls per succeeded job"),
    "calls_per_calling_job": ("Calls per calling job",
                              "downstream calls per job that made one"),
    "recovery_time": ("Recovery time", "s after the outage ends"),
    "jobs_dead_lettered": ("Dead-lettered", "jobs"),
    "latency_p99": ("Latency p99", "s, every job; line: the range pending jobs leave"),
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
    if key == "capacity_rate" and summary is not None \
            and not downstreams.named(summary.get("model", "queue")).queueing:
        return f"{NA} ({summary['model']}: no service rate)"
    if key == "capacity_rate" and summary is not None:
        return f"{NA} (unbounded)"
    return f"{NA} ({kpi.missing})" if kpi is not None and kpi.missing else NA


def show(key: str, value: Any, summary: dict | None = None, ci: float = np.nan) -> str:
    """KPI *key*'s *value* (a mean, ± *ci* when given) as every table shows it: counts
    grouped, fractions as percentages, latency quantiles with their bounds (``≥ lo``,
    ``lo–hi``; see :func:`bounded_text`),
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
    if key in BOUNDED and summary is not None:
        return bounded_text(key, text, value, summary, ci)
    return text


BOUNDED = ("latency_p50", "latency_p99")  # quantiles given as [value, <key>_upper]


def bounds(key: str, summary: dict) -> tuple[float, float | None] | None:
    """The exact bounds ``(lower, upper)`` of latency quantile *key* (upper None:
    unbounded), from ``<key>`` and ``<key>_upper`` of *summary*; None when *key* is
    undefined. A summary saved before the upper bounds existed gives ``(value, value)``
    with no job pending, else ``(value, None)``."""
    value = summary.get(key)
    if undefined(value):
        return None
    lower = float(value)  # type: ignore[arg-type]  # defined: checked above
    if f"{key}_upper" not in summary:  # saved before the bounds: exact only if none pending
        return (lower, lower) if not summary.get("jobs_pending") else (lower, None)
    upper = summary[f"{key}_upper"]
    return lower, (None if undefined(upper) else float(upper))


def bounded_text(key: str, text: str, value: Any, summary: dict, ci: float = np.nan) -> str:
    """A latency quantile as every surface shows it: *text* (the *value* formatted) when
    its bounds meet, ``≥ text`` when unbounded above, ``lo–hi`` otherwise (:func:`bounds`)."""
    found = bounds(key, {**summary, key: value})
    if found is None or found[1] is not None and math.isclose(found[0], found[1],
                                                                rel_tol=1e-9):
        return text
    if found[1] is None:
        return f"≥ {text}"
    spread = "" if undefined(ci) else f" ±{number_text(float(ci))}"
    return f"{number_text(found[0])}–{number_text(found[1])}{spread}"


BOUNDS_NOTE = ("≥ lo: a lower bound, lo–hi: the range the true value lies in (pending "
               "jobs counted at their age, or as still waiting forever)")


def percent(value: float) -> str:
    """``0.117`` -> ``11.7%``; never rounds a fraction below 1 up to ``100%``."""
    text = f"{100 * value:.1f}%"
    if text == "100.0%" and value < 1:
        text = f"{100 * value:.3f}%"
    return text

"""The run KPIs, in the order of ``summary.json``: each computes itself from the run
(:class:`~herdsim.analysis.kpis.frames.Run`) and says where it is shown."""

from __future__ import annotations

from herdsim.analysis import cache, loops
from herdsim.analysis import summary as rules
from herdsim.analysis.kpis.base import KPI, Panel
from herdsim.analysis.kpis.cache import CACHE_KPIS
from herdsim.analysis.kpis.predicted import PREDICTED_KPIS
from herdsim.analysis.metastability import CLASSES, NOT_RECOVERED
from herdsim.policies import downstreams

STATES = CLASSES  # the metastability classes, best first
STATE_MEANING = {  # one vocabulary for tables, figures, the map and the report
    "recovered": "recovered within the run, about as fast as a smooth queue drains, "
                 "serving at least half of the offered jobs at the end",
    "degraded": "recovered slowly or to a state serving under half of the offered jobs, "
                "or still working off its backlog when the run ended",
    "metastable": "not recovered within the run: collapsing again, or serving under half "
                  "of the offered jobs",
}
OUTCOME, LOAD, LATENCY = "outcome", "load on the downstream", "latency"  # report tables


class Capacity(KPI):
    """``capacity_rate``: undefined for a model with no service rate, or unbounded."""

    def reason(self, summary: dict | None = None) -> str:
        if summary is None:
            return self.missing
        model = summary.get("model", "queue")
        if not downstreams.named(model).queueing:
            return f"{model}: no service rate"
        return "unbounded"


def _ratio(top: int | float, bottom: int | float) -> float | None:
    return top / bottom if bottom else None


def _counter(column: str, queue_only: bool = False):
    """A KPI's compute: the sum of a time-series counter (None without a queue, if
    *queue_only*)."""
    def compute(run):
        return run.total(column) if run.queueing or not queue_only else None
    return compute


def _shed(column: str):
    """A defence's counter: present only when the run has the defence."""
    return {"compute": _counter(column), "present": lambda run: column in run.ts}


def _latency(key: str):
    return lambda run: run.latency[key]


def _succeeded_share(frame):
    """succeeded / submitted, for a directory saved before ``succeeded_fraction``."""
    submitted = frame["jobs_submitted"]
    return frame["jobs_succeeded"] / submitted.where(submitted > 0)


def _state(run) -> str:
    return rules.state(run, run.ts, run.scenario)


def _held_down(run) -> bool:
    """A run that ended degraded or metastable (its tail's loops are named)."""
    return "downstream_up" in run.ts and run["state"] != "recovered"


def _held_down_by(kind: str):
    """:func:`_held_down`, and the run has the figure: ``queue`` (calls per offered job,
    the busy-slot ratio), ``clients`` (a model with an end of its own: calls per open
    job) or ``cache`` (a cache in front of the workers' downstream)."""
    def present(run) -> bool:
        if not _held_down(run):
            return False
        if kind == "cache":
            return cache.has_cache(run.ts)
        ended = downstreams.named(run.scenario.downstream.model).done_when is not None
        return ended if kind == "clients" else run.queueing and not ended
    return present


def _pending(run) -> int:
    done = run.outcomes
    return len(run.jobs) - done["succeeded"] - done["dead_lettered"] - done["merged"]


REGISTRY: tuple[KPI, ...] = (
    KPI("scenario", "scenario", kind="text", meaning="the scenario's name", across=None,
        compute=lambda run: run.scenario.name),
    KPI("strategy", "retry strategy", kind="text", meaning="the retry strategy of the run",
        across=None, compute=lambda run: run.scenario.retry.strategy),
    KPI("model", "downstream model", kind="text", meaning="queue, occ or broker", across=None,
        compute=lambda run: run.scenario.downstream.model),
    KPI("seed", "seed", kind="count", meaning="the seed of every random stream", across=None,
        compute=lambda run: run.scenario.seed),
    KPI("state", "state", kind="text",
        meaning="recovered, degraded or metastable: the sweep's classifier on this run",
        classes=STATES, headline=True, across="majority", compute=_state,
        details="; " + "; ".join(f"{k}: {v}" for k, v in STATE_MEANING.items()),
        panels={"run": Panel(1), "compare": Panel(1, "state"), "rank": Panel(1)}),
    KPI("headline_tier", "headline tier", kind="text", optional=True, across="mode",
        meaning="a call graph's tier in most trouble, whose state, capacity, peaks, "
                "collapses and recovery the summary's headline keys are: the worst state "
                "(metastable, degraded, recovered), then the most collapses, then the "
                "highest peak over capacity, then the tier nearest the workers",
        panels={"compare": Panel(2, "tier")}),
    KPI("succeeded_fraction", "succeeded fraction", "of submitted", "fraction", "higher",
        "jobs that succeeded over jobs submitted", missing="no job submitted",
        compute=lambda run: _ratio(run.outcomes["succeeded"], len(run.jobs)),
        legacy=_succeeded_share,
        panels={"run": Panel(2), "compare": Panel(3, "succeeded %"), "rank": Panel(5),
                "report": Panel(1, group=OUTCOME),
                "figure": Panel(0, "Succeeded", "% of jobs submitted")}),
    KPI("goodput", "goodput", "× offered", better="higher",
        meaning="successes per second after the last outage (whole run without one) over "
                "the offered rate of jobs that can succeed; above 1 while a backlog drains",
        missing="no offered rate", compute=lambda run: rules.goodput(run.jobs, run.scenario),
        panels={"run": Panel(3), "compare": Panel(4, "goodput ×offered"), "rank": Panel(4),
                "report": Panel(2, group=OUTCOME)}),
    KPI("outages", "outages", kind="count", meaning="injected outages",  # twice listed: one
        compute=lambda run: len({repr(o) for o in run.scenario.all_outages})),
    KPI("jobs_submitted", "jobs submitted", kind="count",
        meaning="jobs that arrived (refused ones excluded)",
        compute=lambda run: len(run.jobs), panels={"run": Panel(4)}),
    KPI("jobs_succeeded", "jobs succeeded", kind="count", better="higher",
        meaning="jobs whose call succeeded",
        compute=lambda run: run.outcomes["succeeded"], panels={"run": Panel(5)}),
    KPI("jobs_dead_lettered", "dead-lettered", kind="count", better="lower",
        meaning="jobs that ended in the dead-letter queue",
        compute=lambda run: run.outcomes["dead_lettered"],
        panels={"run": Panel(6), "compare": Panel(14, "DLQ", wide=True),
                "report": Panel(9, group=OUTCOME),
                "figure": Panel(5, "Dead-lettered", "jobs", nonzero=True)}),
    KPI("jobs_pending", "pending at the end", kind="count", better="lower",
        meaning="jobs still queued, parked or in hand when the run stopped",
        compute=_pending,
        panels={"run": Panel(7), "compare": Panel(15, "pending", wide=True),
                "report": Panel(10, group=OUTCOME)}),
    KPI("jobs_merged", "merged into their key", kind="count", optional=True,
        meaning="jobs that collapsed into a job of the same key already queued, held or "
                "waiting to retry (workload.keys: client-go's workqueue); not in the "
                "latency KPIs",
        compute=lambda run: run.outcomes["merged"], panels={"run": Panel(8)}),
    KPI("jobs_refused", "refused (queue full)", kind="count", better="lower", optional=True,
        meaning="arrivals refused by a full main queue", compute=_counter("refused")),
    KPI("attempts_total", "downstream calls", kind="count",
        meaning="calls that reached the downstream, first tries and retries (with a "
                "request_delay, a call its client gave up on before it arrived is a client "
                "timeout, not a call here; a replica's calls count those sent to it)",
        compute=lambda run: int(len(run.attempt_times)), panels={"run": Panel(9)}),
    KPI("retries_total", "retries", kind="count", meaning="retry sleeps drawn",
        compute=_counter("retry")),
    KPI("amplification", "calls per success", "calls/succeeded job", better="lower",
        meaning="downstream calls per succeeded job: work burnt without success counts; "
                "read it beside calls_per_calling_job (a job that never got to call "
                "costs nothing here but is no success either)",
        missing="no job succeeded",
        compute=lambda run: _ratio(run["attempts_total"], run.outcomes["succeeded"]),
        panels={"run": Panel(10), "compare": Panel(8, "calls/success"),
                "report": Panel(7, group=LOAD),
                "figure": Panel(2, "Calls per success", "downstream calls per succeeded job")}),
    KPI("calls_per_calling_job", "calls per calling job", "calls/job", better="lower",
        meaning="downstream calls per job that made at least one call: how hard each job "
                "that reached the downstream hammered it",
        missing="no job made a call",
        compute=lambda run: _ratio(run["attempts_total"], run.calling),
        panels={"run": Panel(11), "report": Panel(8, group=LOAD),
                "figure": Panel(3, "Calls per calling job",
                                "downstream calls per job that made one")}),
    KPI("rejected_total", "calls rejected at once", kind="count", optional=True,
        meaning="calls failed fast: down, waiting room full, rate limited",
        compute=_counter("rejected", queue_only=True), panels={"run": Panel(18)}),
    KPI("timeouts_total", "client timeouts", kind="count", optional=True,
        meaning="calls the client gave up on", compute=_counter("timeouts"),
        panels={"run": Panel(19)}),
    KPI("errors_total", "error responses", kind="count", optional=True,
        meaning="calls answered with an error", compute=_counter("errors"),
        panels={"run": Panel(20)}),
    KPI("wasted_total", "wasted (served after timeout)", kind="count", optional=True,
        meaning="calls served after their client had gone", compute=_counter("wasted"),
        panels={"run": Panel(21)}),
    KPI("late_answers", "late answers", kind="count", optional=True,
        meaning="jobs completed by an answer that came after their client's timeout "
                "(retry.late_answers)", compute=_counter("late_answers"),
        present=lambda run: "late_answers" in run.ts, panels={"run": Panel(42.5)}),
    KPI("recycled_total", "recycled (no DLQ)", kind="count", optional=True,
        meaning="failed jobs put back on the main queue (DLQ off)",
        compute=_counter("recycled"), panels={"run": Panel(22)}),
    KPI("calls_avoided", "calls short-circuited", kind="count", optional=True,
        meaning="calls a circuit breaker refused", compute=_counter("short_circuited"),
        panels={"run": Panel(23), "compare": Panel(9, "breaker refused", nonzero=True),
                "verdict": Panel(5, "the circuit breaker short-circuited {n} calls")}),
    KPI("budget_refused_total", "retries refused by budget", kind="count", optional=True,
        meaning="retries a retry budget or throttle refused",
        compute=_counter("budget_refused"),
        panels={"run": Panel(24), "compare": Panel(10, "budget refused", nonzero=True),
                "verdict": Panel(4, "the retry budget refused {n} retries")}),
    KPI("breaker_trips", "breaker trips", kind="count", optional=True,
        meaning="times a circuit breaker opened",
        compute=lambda run: int(run.breaker_trips)),
    KPI("breaker_open_time", "breaker open time", "s", optional=True,
        meaning="mean time one breaker spent not closed",
        compute=lambda run: float(run.breaker_open_time)),
    Capacity("capacity_rate", "downstream capacity", "calls/s",
             meaning="calls per second the healthy downstream serves",
             missing="unbounded, or no service rate (occ)", headline=True,
             compute=lambda run: run.capacity, panels={"run": Panel(12)}),
    KPI("peak_window", "peak window", "s",
        meaning="the short window every peak is measured on (the scenario's peak_window)",
        compute=lambda run: run.scenario.peak_window),
    KPI("peak_calls", "peak calls in {window}", "calls", kind="count", better="lower",
        meaning="downstream calls in the busiest window of width peak_window (a sliding "
                "window anchored at each call, so no bin edge splits a spike): every peak "
                "is stated in the window it was measured in", headline=True,
        compute=lambda run: int(round(run.peak * run.scenario.peak_window)),
        panels={"run": Panel(13), "report": Panel(6, group=LOAD)}),
    KPI("peak_attempt_rate", "peak calls in {window}, scaled to a second", "calls/s",
        meaning="peak_calls / peak_window, kept in summary.json for older readers and "
                "PromQL rate() comparisons; no table shows it: it is calls in "
                "{window} scaled up, not calls made in any whole second (2,880 calls in "
                "10 ms read 288,000 calls/s in a run of 199,769 calls)",
        compute=lambda run: run.peak),
    KPI("peak_to_capacity", "peak in {window} / capacity", "×", better="lower",
        meaning="peak_calls over the calls the healthy downstream serves in one "
                "peak_window (capacity_rate × peak_window)", missing="no bounded capacity",
        needs=("capacity",), headline=True,
        compute=lambda run: run.peak / run.capacity if run.capacity else None,
        panels={"run": Panel(14), "compare": Panel(7, "{window} peak/cap ×"),
                "rank": Panel(6),
                "report": Panel(4, group=LOAD),
                "figure": Panel(1, "Peak calls in {window}",
                                "× what capacity serves in {window}", reference=1.0)}),
    KPI("peak_to_baseline", "peak in {window} / pre-outage peak", "×", better="lower",
        meaning="busiest peak_window from the first outage on over the busiest before it",
        missing="no pre-outage period", needs=("outage",), headline=True,
        compute=lambda run: rules.peak_to_baseline(run.attempt_times, run.scenario),
        panels={"run": Panel(15), "compare": Panel(6, "{window} peak/pre ×"),
                "rank": Panel(7),
                "report": Panel(5, group=LOAD)}),
    KPI("retry_peak_to_mean", "retry peak / mean (storm shape)", "×",
        meaning="busiest bin of retries over their mean during the storm: describes the "
                "storm's shape and ranks nothing, so no table shows it (a storm that never "
                "ends has a high mean and reads smooth: outage.yaml, fixed 6.7 against "
                "full jitter 9.7); compare arms on peak_to_capacity instead",
        missing="no retry storm",
        compute=lambda run: rules.peak_over_mean(
            run.ts["retry"].to_numpy()[rules.retry_storm(run.ts, run.scenario)])),
    KPI("collapses", "collapses (crashes)", kind="count", better="lower",
        meaning="times the overloaded downstream crashed", headline=True,
        compute=lambda run: len(run.crash_times), panels={"run": Panel(16)}),
    KPI("collapses_after_outage", "collapses after the outage", kind="count", better="lower",
        meaning="crashes after the last outage ended", headline=True,
        compute=lambda run: len([t for t in run.crash_times
                                 if run.scenario.last_outage_end is not None
                                 and t >= run.scenario.last_outage_end]),
        panels={"run": Panel(17), "compare": Panel(16, "crashes after", wide=True),
                "report": Panel(11, group=LOAD)}),
    KPI("recovery_time", "recovery time", "s", better="lower",
        meaning="seconds from the last outage's end until healthy for good",
        missing=NOT_RECOVERED, needs=("outage",), unreached="not recovered", headline=True,
        compute=lambda run: rules.recovery_time(run.ts, run.scenario),
        panels={"run": Panel(30), "compare": Panel(5, "recovery s"), "rank": Panel(2),
                "report": Panel(3, group=OUTCOME),
                "figure": Panel(4, "Recovery time", "s after the outage ends")}),
    KPI("sustained_by", "held down by", kind="text", optional=True, headline=True,
        across="mode",
        meaning="for a degraded or metastable run, the loops measured over its tail "
                "(docs/mitigations.md, 'Which loop holds it down'): workload amplification "
                f"(calls per job, or per open job, above {loops.AMPLIFICATION:g}), "
                "capacity degradation (calls served per busy slot-second below "
                f"{loops.DEGRADATION:g}× its healthy value; '(cold cache)': the cache's "
                f"hit rate below {loops.DEGRADATION:g}× its rate before the trigger), "
                f"crash-restart cycles (a crash, or down ≥ {loops.DOWN:.0%} of the tail); "
                "a call graph's are its headline tier's",
        compute=lambda run: loops.sustained_by(run.ts, run.scenario), present=_held_down,
        panels={"run": Panel(30.5), "report": Panel(3.5, group=OUTCOME)}),  # after recovery
    KPI("tail_calls_per_job", "calls per job (tail)", "calls/job", optional=True,
        headline=True,
        meaning="attempts over jobs arrived, over the run's tail (a degraded or "
                "metastable queue run; a call graph's headline tier: its calls over the "
                "calls the jobs arrived need of it)", missing="no job arrived in the tail",
        compute=lambda run: loops.calls_per_job(run.ts, run.scenario),
        present=_held_down_by("queue"), panels={"run": Panel(30.6)}),
    KPI("tail_calls_per_open_job", "calls per open job (tail)", "calls/job",
        optional=True,
        meaning="a model with an end of its own (broker, occ), degraded or metastable: "
                "attempts over the run's tail per job open in it (not finished when it "
                "began, or arriving in it); the broker's: connects per client "
                "disconnected in the tail, 1 when each reconnects at its first connect",
        missing="no job open in the tail",
        compute=lambda run: loops.calls_per_open_job(run.ts, run.scenario),
        present=_held_down_by("clients"), panels={"run": Panel(30.65)}),
    KPI("tail_capacity_ratio", "served per busy slot-second / healthy (tail)", "×",
        optional=True,
        meaning="calls served at the tier (with a cache: its hits and coalesced waiters "
                "taken out, a lower bound with coalescing) per busy slot-second while up, "
                "over the run's tail, over one over the service's mean (a degraded or "
                "metastable queue run)",
        missing="not measured: a slot busy at under half of the tail's bin starts",
        compute=lambda run: loops.capacity_ratio(run.ts, run.scenario),
        present=_held_down_by("queue"), panels={"run": Panel(30.7)}),
    KPI("tail_down_fraction", "down (tail)", kind="fraction", optional=True,
        headline=True,
        meaning="share of the run's tail the server was down, after the last outage (a "
                "degraded or metastable run)",
        compute=lambda run: loops.down_fraction(run.ts, run.scenario), present=_held_down,
        panels={"run": Panel(30.8)}),
    KPI("tail_hit_rate", "cache hit rate (tail after the outage)", kind="fraction",
        optional=True, headline=True,
        meaning="a degraded or metastable run with a cache: hits over requests over the "
                "classifier's tail (the last 10%, after the last outage)",
        missing="no request in the tail",
        compute=lambda run: loops.tail_hit_rate(run.ts, run.scenario),
        present=_held_down_by("cache"), panels={"run": Panel(30.9)}),
    KPI("hit_rate_before", "cache hit rate before the trigger", kind="fraction",
        optional=True, headline=True,
        meaning="a degraded or metastable run with a cache: its healthy hit rate, hits "
                "over requests over the bins ending by the first trigger (outage, flush or "
                "spike); a cold start's: a warm LRU's under independent requests (Che's "
                "approximation)", missing="not measured: nothing before the trigger, or a "
                                          "cold start Che's approximation does not cover",
        compute=lambda run: loops.hit_rate_before(run.ts, run.scenario),
        present=_held_down_by("cache"), panels={"run": Panel(30.95)}),
    KPI("degradation_peak", "degradation factor peak", "×", better="lower", optional=True,
        meaning="the largest factor on the service time (downstream.degradation), "
                "sampled at bin starts",
        compute=lambda run: float(run.ts["degradation"].max()),
        present=lambda run: "degradation" in run.ts),
    KPI("degradation_end", "degradation factor at the end", "×", better="lower",
        optional=True, meaning="the factor on the service time at the last bin start",
        compute=lambda run: float(run.ts["degradation"].iloc[-1]),
        present=lambda run: "degradation" in run.ts),
    KPI("costly_refusals_total", "refusals that cost server time", kind="count",
        optional=True, meaning="refusals that took a slot for their refusal_cost",
        **_shed("costly_refusals")),
    KPI("latency_p50", "latency p50", "s", better="lower",
        meaning="median time to success or dead letter over every submitted job, an order "
                "statistic; jobs still pending count at their age, so this is a lower "
                "bound: shown exact when it meets latency_p50_upper, else 'lo–hi', or "
                "'≥ lo' when unbounded", missing="no job", upper="latency_p50_upper",
        compute=_latency("latency_p50"), panels={"run": Panel(31)}),
    KPI("latency_p50_upper", "latency p50 upper bound", "s",
        meaning="the same quantile with pending jobs at +∞ (its upper bound)",
        missing="unbounded: half the jobs or more were pending",
        compute=_latency("latency_p50_upper")),
    KPI("latency_p99", "latency p99", "s", better="lower",
        meaning="99th percentile of the same, shown the same way", missing="no job",
        upper="latency_p99_upper", compute=_latency("latency_p99"),
        panels={"run": Panel(32), "compare": Panel(17, "p99 s"),
                "report": Panel(12, group=LATENCY),
                "figure": Panel(6, "Latency p99",
                                "s, every job; line: the range pending jobs leave")}),
    KPI("latency_p99_upper", "latency p99 upper bound", "s",
        meaning="the same quantile with pending jobs at +∞ (its upper bound)",
        missing="unbounded: 1% of the jobs or more were pending",
        compute=_latency("latency_p99_upper")),
    KPI("pending_age_max", "oldest pending job", "s",
        meaning="age of the oldest job still pending when the run stopped",
        missing="none pending", compute=_latency("pending_age_max")),
    KPI("latency_censored", "latency is a range", kind="flag", across="any",
        meaning="pending jobs leave a reported latency quantile between two bounds "
                "(latency_pXX and latency_pXX_upper differ)",
        compute=_latency("latency_censored")),
    KPI("latency_succeeded_p50", "latency p50 of successes", "s", better="lower",
        meaning="median time to success over the jobs that succeeded (exact)",
        missing="no job succeeded", compute=_latency("latency_succeeded_p50"),
        panels={"run": Panel(33)}),
    KPI("latency_succeeded_p99", "latency p99 of successes", "s", better="lower",
        meaning="99th percentile of the same (exact; read it beside the succeeded share)",
        missing="no job succeeded", compute=_latency("latency_succeeded_p99"),
        panels={"run": Panel(34), "report": Panel(13, group=LATENCY)}),
    KPI("shed_admission_total", "shed by the admission limit", kind="count", optional=True,
        meaning="calls the downstream's admission limit refused (only with admission)",
        **_shed("shed_admission"),
        panels={"run": Panel(25), "compare": Panel(11, "shed admission", nonzero=True),
                "verdict": Panel(1, "the admission limit ({kind}) refused {n} calls")}),
    KPI("shed_shedding_total", "shed at random", kind="count", optional=True,
        meaning="calls probabilistic shedding refused (only with shedding)",
        **_shed("shed_shedding"),
        panels={"run": Panel(26), "compare": Panel(12, "shed random", nonzero=True),
                "verdict": Panel(3, "probabilistic shedding refused {n} calls")}),
    KPI("shed_codel_total", "shed by CoDel", kind="count", optional=True,
        meaning="waiting calls CoDel rejected instead of serving (only with codel)",
        **_shed("shed_codel"),
        panels={"run": Panel(27), "compare": Panel(13, "shed CoDel", nonzero=True),
                "verdict": Panel(2, "CoDel rejected {n} waiting calls")}),
    # the occ model's own, in the model's extras
    KPI("completion_time", "completion time", "s", better="lower",
        meaning="occ: when the last client finished", missing="not every client succeeded",
        panels={"run": Panel(28), "rank": Panel(3)}),
    KPI("conflicts", "conflicts", kind="count", better="lower",
        meaning="occ: writes that lost a version check", panels={"run": Panel(29)}),
    # the broker model's own, in the model's extras
    KPI("reconnect_time", "time to reconnect", "s", better="lower",
        meaning="broker: from the last time connections dropped to every client connected "
                "again", missing="a client still disconnected at the end",
        panels={"run": Panel(48), "rank": Panel(8), "compare": Panel(21, "reconnect s"),
                "report": Panel(17, group=OUTCOME)}),
    KPI("connects_per_drop", "connects per dropped connection", better="lower",
        meaning="broker: connect attempts over the run per connection dropped (1: every "
                "client's first reconnect accepted)",
        panels={"run": Panel(49), "compare": Panel(22, "connects/drop"),
                "report": Panel(18, group=LOAD)}),
    KPI("wall_seconds", "wall time", "s", meaning="wall-clock seconds the simulation took",
        compute=lambda run: run.wall, panels={"run": Panel(35)}),
    KPI("calls_per_wall_second", "calls per wall second", "calls/s",
        meaning="simulation speed",
        compute=lambda run: run["attempts_total"] / run.wall if run.wall > 0 else None),
    # herdsim testbed only: how late its real processes were (docs/validation.md)
    KPI("lateness_p99_ms", "lateness p99 (worst kind)", "ms", better="lower",
        meaning="testbed: the largest of the timer, event-loop and producer p99 lateness",
        panels={"run": Panel(36)}),
    KPI("lateness_timer_p99_ms", "timer overshoot p99", "ms", better="lower",
        meaning="testbed: how late retry sleeps, polls, outages and service timers woke",
        panels={"run": Panel(37)}),
    KPI("lateness_loop_p99_ms", "event-loop lag p99", "ms", better="lower",
        meaning="testbed: how much longer than asked a 10 ms probe sleep took",
        panels={"run": Panel(38)}),
    KPI("lateness_producer_p99_ms", "producer drift p99", "ms", better="lower",
        meaning="testbed: how long after its arrival time a job was pushed",
        panels={"run": Panel(39)}),
    KPI("lateness_max_ms", "lateness max", "ms", better="lower",
        meaning="testbed: the latest wake of any kind", panels={"run": Panel(40)}),
    KPI("lateness_bound_ms", "lateness bound", "ms",
        meaning="testbed: the p99 lateness a valid run stays within"),
    KPI("testbed_valid", "valid (kept up)", kind="flag", better="higher",
        meaning="testbed: every kind of lateness stayed within the bound at p99",
        panels={"run": Panel(41)}),
    KPI("testbed_invalid_reason", "invalid because", kind="text", optional=True,
        meaning="testbed: which lateness exceeded the bound"),
    KPI("testbed_processes", "worker processes", kind="count",
        meaning="testbed: processes the workers were spread over"),
    KPI("testbed_wall_seconds", "wall time of the real run", "s",
        meaning="testbed: wall-clock seconds the real run took, from its t0 until every "
                "process had stopped (a dilated run's as it ran, not divided by K); a real "
                "run has no wall_seconds (that KPI is a simulation's own speed)",
        panels={"run": Panel(50)}),
    KPI("testbed_unaccounted_jobs", "jobs unaccounted for", kind="count", better="lower",
        meaning="testbed: jobs found in no place or in two (succeeded, dead-lettered, "
                "queued, parked, in a worker's hand); 0 in a sound run",
        panels={"run": Panel(42)}),
    *CACHE_KPIS,  # only in a run with a cache in front of the workers' downstream
    *PREDICTED_KPIS,  # only in herdsim predict's summary
)
BY_KEY = {kpi.key: kpi for kpi in REGISTRY}

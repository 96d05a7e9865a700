"""A run's metrics as OpenMetrics text, ready for ``promtool tsdb create-blocks-from``.

``export(DIR)`` reads a run directory (``herdsim run --out DIR``) or a comparison directory
(``herdsim compare --out DIR``, whose ``timeseries.csv`` has an ``arm`` column: every series
gets an ``arm`` label) and writes ``DIR/metrics.om``. :func:`serve` backfills it into a
throw-away TSDB and starts a local Prometheus over it. The metric names and the traps this
module avoids are listed in ``docs/observability.md``.

Everything is built with numpy string arrays, one family at a time: a million samples take
about a second.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from herdsim.config import graph
from herdsim.config.scenario import Scenario
from herdsim.errors import OutputDirError, OutputExistsError, UsageError
from herdsim.outputs.atomic import write_file
from herdsim.policies.durations import format_duration

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STATUSES = ("success", "retry", "failed_dlq")
FILE_NAME = "metrics.om"
LATEST_PLAUSIBLE_START = 1e11  # s; a larger --start is a timestamp in milliseconds
SEED_QUERY = 'sum(rate(worker_job_execution_total{status="retry"}[10s])) by (queue)'
# the brief's query with ``arm`` kept apart: a comparison's arms never add into one line
# (for a single run, which has no arm label, it is the brief's query exactly)
RETRY_QUERY = 'sum(rate(worker_job_execution_total{status="retry"}[10s])) by (queue, arm)'

# timeseries.csv gauge column -> metric family
GAUGES = {
    "in_flight": "downstream_calls_in_flight",
    "waiting": "downstream_calls_waiting",
    "downstream_up": "downstream_up",
    "queue_depth": "worker_queue_depth",
    "delayed": "worker_delayed_jobs",
    "breaker_open": "worker_circuit_breaker_open_ratio",
}
OPTIONAL_GAUGES = ("breaker_open",)  # runs made before breakers existed lack it
EXECUTIONS = "worker_job_execution"
SLEEPS = "worker_retry_sleep_duration_seconds"
CALLS = "downstream_calls"
CAPACITY = "downstream_concurrency_limit"
# every family written: name -> (OpenMetrics type, help, unit); a counter's samples end
# in ``_total``, a histogram's in ``_bucket``, ``_count`` and ``_sum``
FAMILIES = {
    EXECUTIONS: ("counter", "Job executions by outcome: success, retry (a failed attempt "
                 "that will run again), failed_dlq (dead-lettered).", None),
    SLEEPS: ("histogram", "Retry sleeps drawn by the backoff strategy.", "seconds"),
    CALLS: ("counter", "Calls that reached the downstream.", None),
    CAPACITY: ("gauge", "Calls the downstream serves at once (downstream.concurrency).", None),
    GAUGES["in_flight"]: ("gauge", "Calls the downstream is serving.", None),
    GAUGES["waiting"]: ("gauge", "Calls in the downstream's waiting room.", None),
    GAUGES["downstream_up"]: ("gauge", "1 while the downstream is up, 0 while down or "
                              "crashed.", None),
    GAUGES["queue_depth"]: ("gauge", "Jobs waiting in the main queue.", None),
    GAUGES["delayed"]: ("gauge", "Jobs parked in the delayed queue until their retry is "
                        "due.", None),
    GAUGES["breaker_open"]: ("gauge", "Fraction of circuit breakers not closed (open or "
                             "half-open).", None),
}
COUNTER_COLUMNS = ("success", "retry", "recycled", "failed_dlq", "attempts")
# a call graph's tiers (``<service>_<suffix>`` columns), labelled ``service``
SERVICE_CALLS, SERVICE_RESULTS = "service_calls", "service_call_results"
SERVICE_WASTED = "service_calls_wasted"
TIER_SUFFIXES = ("calls", "succeeded", "failed", "wasted")
FAMILIES |= {
    SERVICE_CALLS: ("counter", "Calls that reached a service of the call graph (every "
                    "attempt of every caller).", None),
    SERVICE_RESULTS: ("counter", "Calls a service of the call graph answered, by status: "
                      "success or failure (refused, an error, the caller's timeout, failed "
                      "at t0).", None),
    SERVICE_WASTED: ("counter", "Calls a service finished serving after its caller had "
                     "given up.", None),
}

_STR = np.dtypes.StringDType()
_MILLIS = np.array([f".{i:03d}" for i in range(1000)], dtype=_STR)


def format_le(bound: float) -> str:
    """A bucket bound the way Prometheus writes ``le``: ``0.005``, ``1.0``, ``1e+06``, ``+Inf``
    (Go's ``%g`` with the shortest digits, plus ``.0`` when that reads as an integer)."""
    if bound == math.inf:
        return "+Inf"
    exponent = math.floor(math.log10(abs(bound))) if bound else 0
    if -4 <= exponent < 6:
        text = np.format_float_positional(bound, unique=True, trim="-")
        return text if "." in text else text + ".0"
    return np.format_float_scientific(bound, unique=True, trim="-", exp_digits=2)


def timestamps(millis: np.ndarray) -> np.ndarray:
    """Unix milliseconds -> OpenMetrics timestamps in seconds (``1700000000.100``).

    Prometheus reads a timestamp as ``int64(float(text) * 1000)``, truncating: for about one
    millisecond in 200 the nearest double to ``S.mmm`` reads back as the millisecond before.
    Those are written as the next double up instead (``1700000000.1000001``)."""
    millis = np.asarray(millis, dtype=np.int64)
    text = (millis // 1000).astype(_STR) + _MILLIS[millis % 1000]
    seconds = millis / 1000
    short = np.trunc(seconds * 1000) < millis
    text[short] = np.nextafter(seconds[short], np.inf).astype(_STR)
    return text


def _numbers(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if np.all(values == np.round(values)) and np.all(np.abs(values) < 2**53):
        return values.astype(np.int64).astype(_STR)
    return values.astype(_STR)


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{_escape(str(value))}"' for key, value in labels.items())


def _lines(name: str, labels: dict[str, str], values: np.ndarray,
           stamps: np.ndarray) -> np.ndarray:
    """``name{labels} value timestamp`` for every sample of one series."""
    return f"{name}{{{_labels(labels)}}} " + _numbers(values) + " " + stamps


def _header(family: str) -> list[str]:
    kind, help_text, unit = FAMILIES[family]
    help_text = help_text.replace("\\", r"\\").replace("\n", r"\n")
    head = [f"# HELP {family} {help_text}", f"# TYPE {family} {kind}"]
    return head + ([f"# UNIT {family} {unit}"] if unit else [])


@dataclass
class RunData:
    """What the exporter reads from an output directory: per arm, its frames; whose
    numbers they are when no simulation's (*predicted*: ``fluid model``, every series
    labelled so)."""

    scenario: Scenario
    arms: dict[str | None, tuple[pd.DataFrame, pd.DataFrame, int]]  # ts, sleeps, concurrency
    predicted: str = ""


def load_run(directory: str | Path, replication: int = 0) -> RunData:
    """The run (or comparison) in *directory*, read and checked by the one reader of
    output directories (:func:`~herdsim.outputs.compare_dir.load_outputs`); a comparison
    with several replications contributes replication *replication* of every arm."""
    from herdsim.outputs.compare_dir import COMPARE_MARKER, load_outputs

    directory = Path(directory)
    c = load_outputs(directory)
    needed = (*COUNTER_COLUMNS, *(g for g in GAUGES if g not in OPTIONAL_GAUGES))
    missing = [column for column in needed if column not in c.timeseries.columns]
    if missing:
        raise OutputDirError(f"{directory / 'timeseries.csv'}: no column "
                             f"{', '.join(missing)} (written by an older herdsim?)")
    if not 0 <= replication < c.replications:
        raise UsageError(f"{directory}: replication {replication}: no such replication "
                         f"(it has 0…{c.replications - 1})")
    ts = c.timeseries[c.timeseries["replication"] == replication]
    sleeps = c.sleeps[c.sleeps["replication"] == replication]
    if not (directory / COMPARE_MARKER).is_file():  # a run: no arm label
        run = c.arms[0].scenario
        return RunData(c.scenario, {None: (ts.reset_index(drop=True),
                                           sleeps.reset_index(drop=True),
                                           run.downstream.concurrency)}, c.predicted)
    arms: dict[str | None, tuple[pd.DataFrame, pd.DataFrame, int]] = {}
    for arm in c.arms:
        arms[arm.label] = (ts[ts["arm"] == arm.label].reset_index(drop=True),
                           sleeps[sleeps["arm"] == arm.label].reset_index(drop=True),
                           arm.scenario.downstream.concurrency)
    return RunData(c.scenario, arms)


@dataclass
class Export:
    """What :func:`export` wrote: the file, how many samples, and the time span (unix s)."""

    path: Path
    samples: int
    series: int
    start: float
    end: float


def render(data: RunData, start: float, interval: float | None = None,
           buckets: Sequence[float] = DEFAULT_BUCKETS) -> tuple[str, int, int]:
    """The OpenMetrics text of *data*, sample times anchored at unix time *start* (s).

    Counters and the histogram are sampled every *interval* (default: the run's bin; it
    must be a multiple of the bin). Returns the text, the number of samples and of series.
    """
    scenario = data.scenario
    bin_width = scenario.bin
    step = _interval_bins(interval, bin_width)
    bounds = _buckets(buckets)
    start_ms = _start_millis(start)
    queue = {"queue": scenario.queue or scenario.name}
    if data.predicted:  # mean amounts, not a run's: said on every series
        queue["predicted"] = data.predicted
    families: dict[str, list[np.ndarray]] = {}
    for arm, (ts, sleeps, concurrency) in data.arms.items():
        labels = queue if arm is None else {**queue, "arm": arm}
        n_bins = len(ts)
        # counters: cumulative at every step-th bin boundary (and at the run's end)
        edges = np.unique(np.append(np.arange(0, n_bins + 1, step), n_bins))
        counter_ms = start_ms + np.round(edges * bin_width * 1000).astype(np.int64)
        counter_ts = timestamps(counter_ms)
        cumulative = {column: np.concatenate([[0], np.cumsum(ts[column].to_numpy())])[edges]
                      for column in COUNTER_COLUMNS}
        cumulative["retry"] = cumulative["retry"] + cumulative.pop("recycled")
        for status in STATUSES:
            families.setdefault(EXECUTIONS, []).append(_lines(
                f"{EXECUTIONS}_total", {**labels, "status": status}, cumulative[status],
                counter_ts))
        families.setdefault(CALLS, []).append(
            _lines(f"{CALLS}_total", labels, cumulative["attempts"], counter_ts))
        if not data.predicted:  # a fluid draws no sleeps: no histogram rather than zeros
            families.setdefault(SLEEPS, []).append(
                _histogram_lines(sleeps, labels, bounds, edges, bin_width, n_bins,
                                 counter_ts))
        for service in _services(scenario, ts):
            total = {suffix: np.concatenate([[0], np.cumsum(
                ts[f"{service}_{suffix}"].to_numpy())])[edges] for suffix in TIER_SUFFIXES}
            tier = {**labels, "service": service}
            families.setdefault(SERVICE_CALLS, []).append(
                _lines(f"{SERVICE_CALLS}_total", tier, total["calls"], counter_ts))
            for status, suffix in (("success", "succeeded"), ("failure", "failed")):
                families.setdefault(SERVICE_RESULTS, []).append(_lines(
                    f"{SERVICE_RESULTS}_total", {**tier, "status": status}, total[suffix],
                    counter_ts))
            families.setdefault(SERVICE_WASTED, []).append(
                _lines(f"{SERVICE_WASTED}_total", tier, total["wasted"], counter_ts))
        # gauges: the value at every step-th bin start
        rows = np.arange(0, n_bins, step)
        gauge_ts = timestamps(start_ms + np.round(rows * bin_width * 1000).astype(np.int64))
        for column, family in GAUGES.items():
            if column in ts.columns:
                families.setdefault(family, []).append(
                    _lines(family, labels, ts[column].to_numpy()[rows], gauge_ts))
        families.setdefault(CAPACITY, []).append(
            _lines(CAPACITY, labels, np.full(rows.size, concurrency), gauge_ts))
    parts: list[str] = []
    samples = series = 0
    for family, blocks in families.items():
        parts += _header(family)
        for block in blocks:
            parts.append("\n".join(block.ravel().tolist()))
            samples += block.size
            series += block.shape[1] if block.ndim == 2 else 1
    parts.append("# EOF\n")
    return "\n".join(parts), samples, series


def _services(scenario: Scenario, ts: pd.DataFrame) -> list[str]:
    """The call graph's tiers whose columns *ts* has (none for a single-tier run)."""
    if not graph.has_graph(scenario.downstream, scenario.services, scenario.hedging):
        return []
    names = graph.tiers(scenario.downstream, scenario.services)
    return [name for name in names
            if all(f"{name}_{suffix}" in ts.columns for suffix in TIER_SUFFIXES)]


def _histogram_lines(sleeps: pd.DataFrame, labels: dict[str, str], bounds: np.ndarray,
                     edges: np.ndarray, bin_width: float, n_bins: int,
                     stamps: np.ndarray) -> np.ndarray:
    """The cumulative histogram of retry sleeps at every edge, one metric point per row:
    the buckets by increasing ``le`` (``+Inf`` last), then ``_count``, then ``_sum``."""
    times = sleeps["time"].to_numpy(dtype=float)
    values = sleeps["sleep"].to_numpy(dtype=float)
    rows = np.clip((times / bin_width).astype(np.int64), 0, n_bins - 1)
    bucket = np.searchsorted(bounds, values, side="left")  # first bound >= value
    n_buckets = bounds.size + 1  # the last is +Inf
    counts = np.bincount(rows * n_buckets + bucket, minlength=n_bins * n_buckets)
    per_bin = counts.reshape(n_bins, n_buckets)
    before_edge = np.vstack([np.zeros((1, n_buckets), np.int64), np.cumsum(per_bin, axis=0)])
    cumulative = np.cumsum(before_edge, axis=1)[edges]  # le-cumulative, time-cumulative
    sums = np.concatenate([[0.0], np.cumsum(np.bincount(rows, values, minlength=n_bins))])
    les = [*(format_le(b) for b in bounds), "+Inf"]
    columns = [_lines(f"{SLEEPS}_bucket", {**labels, "le": le}, cumulative[:, i], stamps)
               for i, le in enumerate(les)]
    columns.append(_lines(f"{SLEEPS}_count", labels, cumulative[:, -1], stamps))
    columns.append(_lines(f"{SLEEPS}_sum", labels, sums[edges], stamps))
    return np.stack(columns, axis=1)


def _interval_bins(interval: float | None, bin_width: float) -> int:
    if interval is None:
        return 1
    ratio = interval / bin_width
    if not math.isfinite(ratio) or interval <= 0 or ratio < 1 - 1e-9 \
            or abs(ratio - round(ratio)) > 1e-6:
        raise UsageError(f"interval {format_duration(interval)}: not a multiple "
                         f"of the run's bin ({format_duration(bin_width)})")
    return int(round(ratio))


def _buckets(buckets: Sequence[float]) -> np.ndarray:
    bounds = np.asarray([b for b in buckets if b != math.inf], dtype=float)
    if bounds.size == 0 or not np.all(np.isfinite(bounds)) or np.any(np.diff(bounds) <= 0):
        raise UsageError("buckets: expected finite bucket bounds in increasing order, "
                         f"got {', '.join(map(str, buckets)) or 'none'}")
    return bounds


def _start_millis(start: float) -> int:
    if not 0 <= start < LATEST_PLAUSIBLE_START:
        hint = " (that looks like milliseconds; give seconds)" if start > 0 else ""
        raise UsageError(f"start {start:g}: not a unix time in seconds{hint}")
    return int(round(start * 1000))


def export(directory: str | Path, out: str | Path | None = None, start: float | None = None,
           interval: float | None = None, buckets: Sequence[float] = DEFAULT_BUCKETS,
           replication: int = 0) -> Export:
    """Write the OpenMetrics file of the run (or comparison) in *directory*.

    *out* defaults to ``DIR/metrics.om``; *start* (unix s) to now minus the run's duration,
    so the last sample is recent and inside any retention; *interval* (s) to the run's
    bin. Written atomically; an existing file is never replaced.
    """
    data = load_run(directory, replication)
    if start is None:
        start = math.floor(time.time() - data.scenario.duration)
    text, samples, series = render(data, start, interval, buckets)
    path = Path(out) if out is not None else Path(directory) / FILE_NAME
    if os.path.lexists(path):
        again = "choose another --out or remove it" if out is not None else \
            "remove it, or give --out to write elsewhere"
        raise OutputExistsError(f"{path}: already exists; {again}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, text)
    n_bins = max(len(ts) for ts, _, _ in data.arms.values())
    return Export(path, samples, series, start, start + n_bins * data.scenario.bin)

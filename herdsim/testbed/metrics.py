"""``/metrics`` of the workers and the producer, for ``herdsim testbed --prometheus``.

Each worker process and the producer serve the Prometheus text format on a loopback port
of their own; the metric names are those ``herdsim export prometheus`` writes for a
simulated run (docs/observability.md), so the brief's query
``sum(rate(worker_job_execution_total{status="retry"}[10s])) by (queue)`` and the
dashboard's panels read a live testbed as they read an export. Every series carries the
``queue`` label (the scenario's ``queue``, else its name). Values are read from what the
processes count anyway, when Prometheus scrapes: nothing is added per call.

A process that served metrics waits, once its work is done, for one more scrape
(:meth:`LastScrape.wait`): the last sample Prometheus holds is then the process's final
count, which is what the run's output directory is built from.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

import numpy as np
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from herdsim.model.recorder import DEAD_LETTERED, SUCCEEDED
from herdsim.outputs.openmetrics import DEFAULT_BUCKETS, EXECUTIONS, GAUGES, SLEEPS, format_le

SCRAPE_INTERVAL = 1.0  # s: how often the testbed's Prometheus scrapes every process
LAST_SCRAPE_TIMEOUT = 3 * SCRAPE_INTERVAL  # s a finished process waits for its last scrape


class WorkerCollector:
    """A :class:`~herdsim.testbed.workers.WorkerPool`'s counts as Prometheus families:
    ``worker_job_execution_total{status}`` (success, retry: a failed attempt that runs
    again, recycled jobs included as the export counts them, failed_dlq),
    ``worker_calls_total{outcome}`` (each call as this process saw it: ok, error, down,
    rejected, throttled, timeout), ``worker_retry_sleep_duration_seconds`` (histogram),
    ``worker_budget_refused_total``, ``worker_short_circuited_total``, and the gauges
    ``worker_calls_in_flight``, ``worker_jobs_sleeping`` and
    ``worker_circuit_breaker_open_ratio``."""

    def __init__(self, pool, queue: str):
        self.pool = pool
        self.labels = {"queue": queue}

    def collect(self) -> Iterator[Metric]:
        pool, names, values = self.pool, ["queue"], [self.labels["queue"]]
        outcomes = np.asarray(pool.finished["outcome"])
        executions = CounterMetricFamily(
            EXECUTIONS, "Job executions by outcome: success, retry (a failed attempt that "
            "will run again), failed_dlq (dead-lettered).", labels=[*names, "status"])
        retries = len(pool.sleeps["sleep"]) + len(pool.log["recycled"])
        for status, count in (("success", int((outcomes == SUCCEEDED).sum())),
                              ("retry", retries),
                              ("failed_dlq", int((outcomes == DEAD_LETTERED).sum()))):
            executions.add_metric([*values, status], count)
        yield executions
        calls = CounterMetricFamily("worker_calls", "Calls made, by the outcome the worker "
                                    "saw.", labels=[*names, "outcome"])
        for outcome, count in pool.calls.items():
            calls.add_metric([*values, outcome], count)
        yield calls
        yield _histogram(np.asarray(pool.sleeps["sleep"]), names, values)
        for name, event, text in (
                ("worker_budget_refused", "budget_refused", "Retries or calls the budget "
                 "refused."),
                ("worker_short_circuited", "short_circuited", "Calls the breaker refused.")):
            family = CounterMetricFamily(name, text, labels=names)
            family.add_metric(values, len(pool.log[event]))
            yield family
        for name, value, text in (
                ("worker_calls_in_flight", pool.in_flight, "Calls awaiting an answer."),
                ("worker_jobs_sleeping", pool.sleeping, "Jobs held through a retry sleep."),
                (GAUGES["breaker_open"], pool.breaker_open(), "Fraction of circuit breakers "
                 "not closed (open or half-open).")):
            gauge = GaugeMetricFamily(name, text, labels=names)
            gauge.add_metric(values, value)
            yield gauge


def _histogram(sleeps: np.ndarray, names: list[str], values: list[str]) -> Metric:
    bounds = np.asarray(DEFAULT_BUCKETS)
    cumulative = np.searchsorted(np.sort(sleeps), bounds, side="right")
    buckets = [(format_le(float(b)), int(c)) for b, c in zip(bounds, cumulative, strict=True)]
    buckets.append(("+Inf", int(sleeps.size)))
    family = HistogramMetricFamily(SLEEPS, "Retry sleeps drawn by the backoff strategy.",
                                   labels=names)
    family.add_metric(values, buckets, float(sleeps.sum()))
    return family


class ProducerCollector:
    """The producer's counts: ``worker_jobs_submitted_total`` (jobs pushed),
    ``worker_jobs_refused_total`` (a full main queue), and the gauges sampled every bin:
    ``worker_queue_depth``, ``worker_delayed_jobs`` (the delayed set) and
    ``worker_dlq_jobs`` (the DLQ list)."""

    def __init__(self, producer, queue: str):
        self.producer = producer
        self.queue = queue

    def collect(self) -> Iterator[Metric]:
        log, values = self.producer.log, [self.queue]
        for name, event, text in (("worker_jobs_submitted", "arrivals", "Jobs pushed."),
                                  ("worker_jobs_refused", "refused", "Jobs refused by a "
                                   "full main queue.")):
            family = CounterMetricFamily(name, text, labels=["queue"])
            family.add_metric(values, len(log[event]))
            yield family
        for name, series, text in (
                (GAUGES["queue_depth"], log["queue_depth"], "Jobs waiting in the main queue."),
                (GAUGES["delayed"], log["delayed"], "Jobs parked in the delayed set."),
                ("worker_dlq_jobs", self.producer.dlq_depth, "Jobs in the DLQ list.")):
            gauge = GaugeMetricFamily(name, text, labels=["queue"])
            gauge.add_metric(values, series[-1] if len(series) else 0.0)
            yield gauge


class LastScrape:
    """Tells a finished process when Prometheus has scraped it once more."""

    def __init__(self) -> None:
        self.finished = False
        self._scraped = asyncio.Event()

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        after = self.finished  # read before the body: the answer holds the final counts
        response = await handler(request)
        if after and request.path == "/metrics":
            self._scraped.set()
        return response

    async def wait(self, timeout: float = LAST_SCRAPE_TIMEOUT) -> None:
        """The work is done: wait (at most *timeout*) for the next scrape."""
        self.finished = True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._scraped.wait(), timeout)


def metrics_app(collector, last: LastScrape) -> web.Application:
    """An aiohttp application serving *collector* at ``GET /metrics``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=[last.middleware])
    app.router.add_get("/metrics", metrics)
    return app

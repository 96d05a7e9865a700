"""``herdsim testbed --prometheus``: a real Prometheus scrapes the run; the brief's query
then runs on what it scraped.

Prometheus (Debian's ``prometheus`` from PATH, started and stopped by
:mod:`herdsim.outputs.prometheus_server`'s own functions, dying with its parent) listens
on a free loopback port, keeps its TSDB in the testbed's throwaway directory and scrapes
every ``SCRAPE_INTERVAL`` (1 s): the emulated downstream (``downstream_*``), the
producer and each worker process (:mod:`herdsim.testbed.metrics`). After the run
:func:`read` asks its HTTP API for the query of docs/observability.md over the run and for
the executions by status; the driver then stops it with every other process. Prometheus
stamps samples in unix seconds; :func:`read` turns them into seconds since the run's
``t0``, the testbed's own time axis.
"""

from __future__ import annotations

import math
import time

from herdsim.errors import PrometheusError
from herdsim.outputs.openmetrics import SEED_QUERY
from herdsim.outputs.prometheus_server import api, free_port, start_prometheus, tool, wait_ready
from herdsim.testbed.metrics import SCRAPE_INTERVAL
from herdsim.testbed.processes import Child, Fleet

ATTEMPTS = 3  # free ports tried (another process may take one first)
BY_STATUS = "sum by (status) (worker_job_execution_total)"
STEP = 0.5  # s between the points read back over the run
SCRAPING_TIMEOUT = 30.0  # s Prometheus may take to scrape every process once


def check_installed() -> None:
    """A one-line error naming the Debian package when ``prometheus`` is missing."""
    tool("prometheus")


def scrape_config(targets: dict[str, list[int]]) -> str:
    """Prometheus's configuration: scrape every port of *targets* (job name -> ports, all
    on 127.0.0.1) every ``SCRAPE_INTERVAL``."""
    interval = f"{SCRAPE_INTERVAL * 1000:.0f}ms"
    timeout = f"{SCRAPE_INTERVAL * 900:.0f}ms"  # must not exceed the interval
    lines = ["global:", f"  scrape_interval: {interval}", f"  scrape_timeout: {timeout}",
             "  evaluation_interval: 1m", "scrape_configs:"]
    for job, ports in targets.items():
        addresses = ", ".join(f"'127.0.0.1:{port}'" for port in ports)
        lines += [f"  - job_name: {job}", "    static_configs:",
                  f"      - targets: [{addresses}]"]
    return "\n".join(lines) + "\n"


def start(fleet: Fleet, targets: dict[str, list[int]]) -> str:
    """Start Prometheus scraping *targets* as one of *fleet*'s children (stopped with
    them); returns its URL once it is ready."""
    workdir = fleet.workdir
    log = workdir / "prometheus.log"
    for _ in range(ATTEMPTS):
        port = free_port()
        process = start_prometheus(workdir / "tsdb", port, workdir, scrape_config(targets))
        child = Child("prometheus", process, log)
        fleet.children.append(child)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process, log)
        except PrometheusError:
            if process.poll() is None:
                raise
            fleet.children.remove(child)  # it exited (its port was taken): try another
            continue
        _wait_scraping(url, sum(len(ports) for ports in targets.values()), fleet, child)
        return url
    raise PrometheusError(f"prometheus did not start: {child.reason()}")


def _wait_scraping(url: str, targets: int, fleet: Fleet, child: Child) -> None:
    """Wait until Prometheus has scraped every target once: its discovery hands the
    targets over only a few seconds after it is ready, and the run must not start before
    (its first seconds would have no samples)."""
    deadline = time.monotonic() + SCRAPING_TIMEOUT
    while time.monotonic() < deadline:
        fleet.check_others(child)  # a process that died meanwhile is said by name
        if child.process.poll() is not None:
            raise PrometheusError(child.reason())
        up = api(url, "query", query="count(up == 1)")  # [] before any scrape
        if up and int(up[0]["value"][1]) >= targets:
            return
        time.sleep(0.2)
    raise PrometheusError(f"prometheus at {url} did not scrape the testbed's {targets} "
                          f"processes within {SCRAPING_TIMEOUT:g} s")


def read(url: str, t0_unix: float, duration: float) -> dict:
    """What Prometheus scraped of the run that started at unix time *t0_unix*: the brief's
    query (``query``, ``series``) and the executions by status (``by_status``), every
    ``STEP`` from ``t0`` to the end, as ``{labels, time (s since t0), value}``;
    ``samples``: every sample scraped of the retries counter, one series per worker
    process, in the same form; and ``final``: each status's last scraped total (summed
    over the worker processes)."""
    start, end = t0_unix, t0_unix + duration

    def series(items: list[dict]) -> list[dict]:
        return [{"labels": item["metric"],
                 "time": [round(float(t) - t0_unix, 3) + 0.0 for t, _ in item["values"]],
                 "value": [float(v) for _, v in item["values"]]} for item in items]

    def over_run(expr: str) -> list[dict]:
        return series(api(url, "query_range", query=expr, start=f"{start:.3f}",
                          end=f"{end:.3f}", step=f"{STEP:g}"))

    # counters only grow, so a series's maximum is its last scrape, which every worker
    # process waits for before it exits (stale markers are not samples: they are skipped)
    now = time.time()
    window = math.ceil(now - t0_unix + 10 * SCRAPE_INTERVAL)  # from before t0 to now
    final = {item["metric"].get("status", ""): float(item["value"][1]) for item in api(
        url, "query", query=f"sum by (status) (max_over_time(worker_job_execution_total"
                            f"[{window}s]))", time=f"{now:.3f}")}
    samples = series(api(url, "query", query=f'worker_job_execution_total{{status="retry"}}'
                                             f"[{window}s]", time=f"{now:.3f}"))
    return {"url": url, "scrape_interval": SCRAPE_INTERVAL, "step": STEP,
            "t0_unix": t0_unix, "query": SEED_QUERY, "series": over_run(SEED_QUERY),
            "by_status_query": BY_STATUS, "by_status": over_run(BY_STATUS),
            "samples": samples, "final": final}


def peak(read_back: dict) -> tuple[float, float] | None:
    """The brief's query at its highest over the run: ``(value, time since t0)``."""
    best = None
    for series in read_back["series"]:
        for t, v in zip(series["time"], series["value"], strict=True):
            if best is None or v > best[0]:
                best = (v, t)
    return best


"""The emulated downstream over HTTP (aiohttp): ``herdsim serve`` and the testbed's server.

``POST /call`` (or ``GET``) is one call of the scenario's downstream
(:class:`~herdsim.testbed.emulator.Emulator`); the answer's status says its outcome:

====== ===============================================================================
200    served
500    an ``error`` outage failed it
503    down (an outage or a crash: every call in flight fails at once) or the waiting
       room is full (header ``X-Outcome: rejected``)
429    rate limited
504    the client deadline (``downstream.timeout``) came first; the client has left
400    the testbed's server only: no ``X-Job: ID ATTEMPT`` header (its service times
       are drawn per job and attempt, :func:`herdsim.model.job_streams.service_time`)
====== ===============================================================================

429 and a full waiting room carry ``Retry-After`` (seconds, a decimal) when the scenario's
``downstream.retry_after`` sets one. Every answer carries ``X-Times``: when the call reached
the handler and when it left it, in seconds since the emulator's start (the testbed's
workers share its clock: their per-attempt turnaround, :mod:`herdsim.testbed.calibrate`).
``GET /metrics`` is the Prometheus text format, under
the names ``herdsim export prometheus`` writes (the dashboard's panels read them), each
labelled ``queue``: ``downstream_calls_total{outcome}``, ``downstream_calls_in_flight``,
``downstream_calls_waiting``, ``downstream_up`` and ``downstream_concurrency_limit``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from herdsim.config.scenario import Scenario
from herdsim.errors import TestbedError, UsageError
from herdsim.model.calls import DOWN, ERROR, OK, REJECTED, THROTTLED, TIMEOUT
from herdsim.outputs.openmetrics import CALLS, CAPACITY, GAUGES
from herdsim.testbed.emulator import OUTCOME_NAMES, Emulator
from herdsim.testbed.timing import Clock

# a wildcard as written (every interface) -> the loopback address a URL can reach it on
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}
STATUS = {OK: 200, ERROR: 500, DOWN: 503, REJECTED: 503, THROTTLED: 429, TIMEOUT: 504}
OUTCOME_HEADER = "X-Outcome"
TIMES_HEADER = "X-Times"  # when the call reached the handler and left it (run time, s)
JOB_HEADER = "X-Job"  # the testbed worker's job id and attempt: "ID ATTEMPT"


class _Collector:
    """The emulator's counts and gauges under the names ``herdsim export prometheus``
    writes (the dashboard's panels read them), labelled ``queue``; read when Prometheus
    scrapes (no per-call cost)."""

    def __init__(self, emulator: Emulator):
        self.emulator = emulator

    def collect(self):
        em = self.emulator
        queue = [em.queue]
        calls = CounterMetricFamily(CALLS, "Calls answered, by outcome",
                                    labels=["queue", "outcome"])
        for outcome, count in em.outcomes.items():
            calls.add_metric([*queue, outcome], count)
        yield calls
        for name, text, value in (
                (GAUGES["in_flight"], "Calls in service", em.busy),
                (GAUGES["waiting"], "Calls in the waiting room", len(em.waiting)),
                (GAUGES["downstream_up"], "1 unless down or crashed", 1.0 if em.up else 0.0),
                (CAPACITY, "Calls served at once (downstream.concurrency)",
                 em.cfg.concurrency)):
            gauge = GaugeMetricFamily(name, text, labels=["queue"])
            gauge.add_metric(queue, value)
            yield gauge


def make_app(emulator: Emulator, middlewares: Sequence = ()) -> web.Application:
    """The aiohttp application serving *emulator* (see the module docstring)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Collector(emulator))

    async def call(request: web.Request) -> web.Response:
        arrived = emulator.clock.now()
        key = job_key(request.headers.get(JOB_HEADER))
        if key is None and emulator.per_job:
            return web.Response(status=400, text=f"{JOB_HEADER}: expected 'ID ATTEMPT'\n")
        outcome, hint = await emulator.call(key)
        headers = {OUTCOME_HEADER: OUTCOME_NAMES[outcome],
                   TIMES_HEADER: f"{arrived:.6f} {emulator.clock.now():.6f}"}
        if hint is not None:
            headers["Retry-After"] = f"{hint:.6f}"
        return web.Response(status=STATUS[outcome], headers=headers)

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=middlewares)
    app.router.add_route("*", "/call", call)
    app.router.add_get("/metrics", metrics)
    return app


def job_key(header: str | None) -> tuple[int, int] | None:
    """``(job id, attempt)`` from an ``X-Job`` header (None without one, or a bad one:
    an emulator drawing per job then answers 400)."""
    try:
        job_id, attempt = (int(part) for part in (header or "").split())
    except ValueError:
        return None
    return job_id, attempt


async def start_site(app: web.Application, host: str, port: int
                     ) -> tuple[web.AppRunner, int]:
    """Serve *app* on *host*:*port* (0: a free port); returns the runner and the port."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    return runner, server.sockets[0].getsockname()[1]


def listen_on(host: str, port: int) -> str:
    """*host* and *port* checked for listening: a port of 1-65535 (0: the system picks
    one), a named host, and every interface only when written as a wildcard (0.0.0.0 or
    ::). Raises :class:`UsageError` in one line."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: a port is 1-65535 (or 0: one the system picks)")
    if not host.strip():
        raise UsageError(f"--host {host!r}: name the address to listen on (127.0.0.1, the "
                         "default, is loopback; 0.0.0.0 or :: is every interface)")
    if host in WILDCARDS:
        return host
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UsageError(f"--host {host!r}: not an address to listen on "
                         f"({getattr(exc, 'strerror', None) or exc})") from None
    if any(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_unspecified
           for info in found):
        raise UsageError(f"--host {host!r} means every interface: write 0.0.0.0 or :: to "
                         "listen on every interface")
    return host


def url_of(host: str, port: int) -> str:
    """The URL a client on this machine reaches *host*:*port* at (a wildcard's loopback)."""
    shown = WILDCARDS.get(host, host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


async def serve_forever(scenario: Scenario, host: str, port: int,
                        ready: Callable[[str], None]) -> None:
    """``herdsim serve``: the downstream of *scenario* on *host*:*port* until cancelled,
    its outages timed from the moment it listens; ``ready(url)`` once it does (a URL a
    client on this machine can use: :func:`url_of`). Check *host* and *port* first
    (:func:`listen_on`)."""
    clock = Clock(0.0)
    emulator = Emulator(scenario, clock)
    try:
        runner, bound = await start_site(make_app(emulator), host, port)
    except OSError as exc:
        raise TestbedError(f"--port {port}: cannot listen on {host}:{port} "
                           f"({exc.strerror or exc}); choose another --port") from None
    clock.t0 = asyncio.get_running_loop().time()
    emulator.start()
    ready(url_of(host, bound))
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()

"""A local Prometheus over an exported run: backfill with promtool, serve, stop, clean up."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from herdsim.errors import PrometheusError, UsageError
from herdsim.outputs.openmetrics import FILE_NAME, RETRY_QUERY, Export, export
from herdsim.system.children import alive, die_with_parent

WORKDIR_PREFIX = "herdsim-prometheus-"
OWNER = "owner.pid"  # in the working directory: the herdsim process that made it
INSTALL_HINT = ("install Prometheus (it brings promtool): apt-get install prometheus, "
                "or download it from https://prometheus.io/download/")


def tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``; a clear error when it is not installed."""
    path = shutil.which(name)
    if path is None:
        raise PrometheusError(f"{name} not found on PATH; {INSTALL_HINT}")
    return path


def backfill(metrics: Path, tsdb: Path) -> str:
    """``promtool tsdb create-blocks-from openmetrics METRICS TSDB``; returns its output."""
    done = subprocess.run([tool("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                           str(metrics), str(tsdb)], capture_output=True, text=True)
    if done.returncode != 0:
        raise PrometheusError(f"{metrics}: promtool could not import it: "
                              + (done.stderr or done.stdout).strip().splitlines()[-1])
    return done.stdout


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    """True when nobody listens on 127.0.0.1:*port* (a TIME_WAIT left by a previous
    Prometheus does not count: Prometheus itself binds with SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


NO_SCRAPES = "global:\n  evaluation_interval: 1m\nscrape_configs: []\n"


def start_prometheus(tsdb: Path, port: int, workdir: Path,
                     config_text: str = NO_SCRAPES) -> subprocess.Popen:
    """Start ``prometheus`` over *tsdb* on 127.0.0.1:*port* with *config_text* as its
    configuration (default: no scrape targets); its log goes to ``workdir/prometheus.log``."""
    config = workdir / "prometheus.yml"
    config.write_text(config_text)
    log = (workdir / "prometheus.log").open("w")
    return subprocess.Popen(
        [tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,  # the terminal's HUP or Ctrl-C reach herdsim, which stops it
        preexec_fn=_prometheus_child)


def _prometheus_child() -> None:
    die_with_parent(signal.SIGTERM)  # Prometheus shuts down cleanly on TERM


LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy


def clear_stale(root: Path | None = None, prefix: str = WORKDIR_PREFIX) -> list[Path]:
    """Delete the working directories named *prefix*... (a TSDB and its log, a testbed's
    files) that a crashed or killed herdsim left in *root* (the temporary directory):
    those whose owner process (``OWNER`` in them) is gone."""
    root = Path(tempfile.gettempdir()) if root is None else root
    cleared = []
    for workdir in root.glob(f"{prefix}*"):
        try:
            owner = int((workdir / OWNER).read_text())
        except (OSError, ValueError):
            owner = None
        if owner is not None and alive(owner):
            continue
        if owner is None and time.time() - workdir.stat().st_mtime < 60:
            continue  # being created right now by another herdsim
        shutil.rmtree(workdir, ignore_errors=True)
        cleared.append(workdir)
    return cleared


def wait_ready(url: str, process: subprocess.Popen, log: Path, timeout: float = 30.0) -> None:
    """Poll ``URL/-/ready`` until Prometheus answers 200; fail if it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
            raise PrometheusError(f"prometheus exited with code {process.returncode}: {tail[0]}")
        with contextlib.suppress(urllib.error.URLError, ConnectionError), \
                LOOPBACK.open(f"{url}/-/ready", timeout=1) as response:
            if response.status == 200:
                return
        time.sleep(0.1)
    raise PrometheusError(f"prometheus at {url} not ready after {timeout:g} s (see {log})")


def stop(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """Stop the Prometheus we started (SIGTERM to its pid, SIGKILL if it lingers)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Server:
    """A running local Prometheus over one exported run."""

    url: str
    export: Export
    process: subprocess.Popen
    workdir: Path

    def graph_url(self, expr: str = RETRY_QUERY) -> str:
        """A link to Prometheus's graph page showing *expr* over the run."""
        span = math.ceil(self.export.end - self.export.start) + 1
        end = datetime.fromtimestamp(math.ceil(self.export.end), timezone.utc)
        query = {"g0.expr": expr, "g0.tab": "0", "g0.range_input": f"{span}s",
                 "g0.end_input": end.strftime("%Y-%m-%d %H:%M:%S"), "g0.step_input": "1"}
        return f"{self.url}/graph?{urllib.parse.urlencode(query)}"

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        """``/api/v1/query_range``: the ``result`` list (one entry per series)."""
        return self._get("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
                         step=f"{step:g}")

    def query(self, expr: str, at: float) -> list[dict]:
        """``/api/v1/query`` at unix time *at*: the ``result`` list."""
        return self._get("query", query=expr, time=f"{at:.3f}")

    def _get(self, endpoint: str, **params: str) -> list[dict]:
        return api(self.url, endpoint, **params)


def api(url: str, endpoint: str, **params: str) -> list[dict]:
    """``GET URL/api/v1/ENDPOINT?PARAMS`` of a Prometheus: the ``result`` list."""
    address = f"{url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    try:
        with LOOPBACK.open(address, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:  # a bad query: Prometheus says why in JSON
        body = json.load(exc)
    if body.get("status") != "success":
        raise RuntimeError(f"prometheus: {body.get('error', body)}")
    return body["data"]["result"]


@contextlib.contextmanager
def serve(directory: str | Path, port: int | None = None, start: float | None = None,
          interval: float | None = None, replication: int = 0) -> Iterator[Server]:
    """Export *directory*, backfill it into a temporary TSDB and run Prometheus over it
    until the block ends; then stop it (by its pid) and delete the TSDB."""
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"--port {port}: a TCP port is between 1 and 65535")
    for name in ("promtool", "prometheus"):
        tool(name)
    clear_stale()
    port = port or free_port()
    if not port_is_free(port):
        raise PrometheusError(f"--port {port}: 127.0.0.1:{port} is in use; choose another --port")
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    try:
        (workdir / OWNER).write_text(str(os.getpid()))
        exported = export(directory, workdir / FILE_NAME, start, interval,
                          replication=replication)
        backfill(exported.path, workdir / "data")
        process = start_prometheus(workdir / "data", port, workdir)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, process, workdir / "prometheus.log")
            yield Server(url, exported, process, workdir)
        finally:
            stop(process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

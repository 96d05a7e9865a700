"""The testbed's processes: start them on loopback, hand them ``t0``, stop every one.

Every child (``redis-server`` and the :mod:`herdsim.testbed.child` roles) gets a
parent-death signal before it starts (:func:`herdsim.system.children.die_with_parent`)
and its own session: a SIGKILLed driver still takes them all down, and the terminal's
Ctrl-C reaches only the driver, which stops them (:meth:`Fleet.stop`, by pid).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from herdsim.errors import TestbedError
from herdsim.system.children import die_with_parent

REDIS_HINT = "install the Debian package redis-server (apt-get install redis-server)"
READY_TIMEOUT = 30.0  # s a child may take to say ready
REDIS_ATTEMPTS = 5  # free ports tried for Redis (another process may take one first)


def _child_setup() -> None:
    die_with_parent(signal.SIGKILL)


def redis_binary() -> str:
    """The path of ``redis-server``; a one-line error naming the package when missing."""
    path = shutil.which("redis-server")
    if path is None:
        raise TestbedError(f"redis-server not found on PATH; {REDIS_HINT}")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Child:
    """A started process, what it is, and where its output goes."""

    name: str
    process: subprocess.Popen
    log: Path

    def reason(self) -> str:
        """Why it stopped: its exit code and the last line it wrote."""
        tail = [line for line in self.log.read_text(errors="replace").splitlines() if line]
        last = tail[-1].strip() if tail else "(no output)"
        return f"the {self.name} exited with code {self.process.returncode}: {last}"


@dataclass
class Fleet:
    """Every process of one testbed, in a throwaway directory."""

    workdir: Path
    children: list[Child] = field(default_factory=list)

    def start_redis(self) -> str:
        """``redis-server`` on a free loopback port, no persistence; returns its URL."""
        binary = redis_binary()
        for _ in range(REDIS_ATTEMPTS):
            port = _free_port()
            log = self.workdir / f"redis-{port}.log"
            process = subprocess.Popen(
                [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                 "--appendonly", "no", "--dir", str(self.workdir), "--protected-mode", "yes",
                 "--maxclients", "10000", "--loglevel", "warning"],
                stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_child_setup)
            child = Child("redis-server", process, log)
            self.children.append(child)
            if self._redis_ready(port, process):
                return f"redis://127.0.0.1:{port}/0"
        raise TestbedError(f"redis-server did not start: {child.reason()}")

    @staticmethod
    def _redis_ready(port: int, process: subprocess.Popen) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return True
            time.sleep(0.05)
        return False

    def start_role(self, role: str, name: str, spec: dict) -> Child:
        """Start ``python -m herdsim.testbed.child ROLE SPEC`` (see that module)."""
        spec_path = self.workdir / f"{name}.json"
        spec_path.write_text(json.dumps(spec))
        log = self.workdir / f"{name}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "herdsim.testbed.child", role, str(spec_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
            start_new_session=True, preexec_fn=_child_setup,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        child = Child(name, process, log)
        self.children.append(child)
        return child

    def ready(self, child: Child) -> int:
        """Wait for *child*'s ``ready PORT`` line; returns the port (0 if it has none)."""
        stream = child.process.stdout
        assert stream is not None  # started with stdout=PIPE
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            readable, _, _ = select.select([stream], [], [], 0.1)
            if readable:
                line = stream.readline()
                if not line:
                    break
                if line.startswith("ready "):
                    return int(line.split()[1])
            elif child.process.poll() is not None:
                break
            self.check_others(child)
        child.process.poll()
        raise TestbedError(f"{child.reason()} (while starting)")

    def check_others(self, but: Child) -> None:
        """Raise naming any other child that has exited already (none should have)."""
        for other in self.children:
            if other is not but and other.process.poll() is not None:
                raise TestbedError(f"{other.reason()} (while starting)")

    def go(self, children: list[Child], t0: float) -> None:
        """Hand every child the run's ``t0``."""
        for child in children:
            stdin = child.process.stdin
            assert stdin is not None  # started with stdin=PIPE
            stdin.write(f"go {t0!r}\n")
            stdin.flush()

    def wait(self, children: list[Child], until: float) -> None:
        """Wait until every one of *children* has exited 0, by monotonic time *until*;
        raise naming the first that failed (or the first still running)."""
        while True:
            for child in children:
                code = child.process.poll()
                if code is not None and code != 0:
                    raise TestbedError(child.reason())
            if all(child.process.poll() == 0 for child in children):
                return
            if time.monotonic() > until:
                late = next(c for c in children if c.process.poll() is None)
                raise TestbedError(f"the {late.name} did not finish in time")
            for child in self.children:  # Redis and the server must outlive the run
                if child not in children and child.process.poll() is not None:
                    raise TestbedError(child.reason())
            time.sleep(0.05)

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM every child still running, SIGKILL those that linger, reap them all."""
        for child in self.children:
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.terminate()
        deadline = time.monotonic() + grace
        for child in self.children:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
            for stream in (child.process.stdin, child.process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

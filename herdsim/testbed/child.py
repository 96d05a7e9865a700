"""One testbed process: ``python -m herdsim.testbed.child ROLE SPEC.json``.

ROLE is ``server``, ``producer`` or ``workers``; SPEC holds the resolved scenario and
where things are (Redis, the downstream, the log file) and whether to serve ``/metrics``
(``metrics``: the producer and the workers then listen on a loopback port of their own;
the server always serves it). The handshake with the driver
(:mod:`herdsim.testbed.processes`): the child sets up (connects, binds), prints
``ready PORT`` on stdout (the port it listens on, 0 if none), reads ``go T0`` on stdin
(the run's ``t0``, a ``time.monotonic()`` instant), runs the scenario until its end,
writes its log (an ``.npz`` of flat arrays), waits for Prometheus's next scrape when it
serves metrics to one (:class:`~herdsim.testbed.metrics.LastScrape`) and exits 0. It
dies with the driver (a parent-death signal armed before it starts, see
:mod:`herdsim.system.children`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis
from aiohttp import web

from herdsim.config.loading import validate
from herdsim.outputs.atomic import write_file
from herdsim.testbed.emulator import Emulator
from herdsim.testbed.metrics import LastScrape, ProducerCollector, WorkerCollector, metrics_app
from herdsim.testbed.producer import Producer
from herdsim.testbed.server import make_app, start_site
from herdsim.testbed.timing import Clock, Lateness
from herdsim.testbed.workers import WorkerPool


async def _handshake(port: int = 0) -> Clock:
    """Say ready, wait for ``go T0``."""
    print(f"ready {port}", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    word, t0 = line.split()
    if word != "go":
        raise SystemExit(f"expected 'go T0' on stdin, got {line!r}")
    return Clock(float(t0))


def _save(path: str, lateness: Lateness, **groups: dict) -> None:
    arrays = {f"lateness.{k}": np.asarray(v) for k, v in lateness.samples.items()}
    for group, columns in groups.items():
        arrays.update({f"{group}.{k}": np.asarray(v) for k, v in columns.items()})
    write_file(Path(path), arrays, writer=_savez)


def _savez(arrays: dict, path: Path) -> None:
    with open(path, "wb") as stream:
        np.savez(stream, **arrays)  # type: ignore[arg-type]  # numpy's stub: allow_pickle


async def _metrics_site(spec: dict, collector, last: LastScrape
                        ) -> tuple[web.AppRunner | None, int]:
    """The ``/metrics`` site of a producer or workers process, when the spec asks."""
    if not spec.get("metrics"):
        return None, 0
    return await start_site(metrics_app(collector, last), "127.0.0.1", 0)


async def _finish(spec: dict, last: LastScrape, runner: web.AppRunner | None) -> None:
    if runner is None:
        return
    if spec.get("metrics"):
        await last.wait()
    await runner.cleanup()


async def server(spec: dict, scenario) -> None:
    lateness = Lateness()
    clock = Clock(0.0)
    emulator = Emulator(scenario, clock, lateness, per_job=True)  # as the comparison draws
    last = LastScrape()
    runner, port = await start_site(make_app(emulator, [last.middleware]), "127.0.0.1", 0)
    clock.t0 = (await _handshake(port)).t0
    emulator.start()
    gauges: dict[str, list[float]] = {"in_flight": [], "waiting": [], "downstream_up": []}

    async def sample() -> None:
        width, k = scenario.bin, 0
        while k * width < scenario.duration:
            await clock.sleep_until(k * width)
            gauges["in_flight"].append(emulator.busy)
            gauges["waiting"].append(len(emulator.waiting))
            gauges["downstream_up"].append(1.0 if emulator.up else 0.0)
            k += 1

    await asyncio.gather(sample(), lateness.probe_loop(clock, scenario.duration))
    _save(spec["log"], lateness, events=emulator.log, gauges=gauges)
    await _finish(spec, last, runner)


async def producer(spec: dict, scenario) -> None:
    redis = aioredis.Redis.from_url(spec["redis"])
    await redis.ping()
    lateness = Lateness()
    clock = Clock(0.0)
    work = Producer(scenario, redis, clock, lateness)
    last = LastScrape()
    runner, port = await _metrics_site(spec, ProducerCollector(work, _queue(scenario)), last)
    clock.t0 = (await _handshake(port)).t0
    await work.run()
    _save(spec["log"], lateness, events=work.log)
    await _finish(spec, last, runner)
    await redis.aclose()


async def workers(spec: dict, scenario) -> None:
    redis = aioredis.Redis.from_url(spec["redis"], max_connections=spec["count"] + 8)
    await redis.ping()
    lateness = Lateness()
    clock = Clock(0.0)
    pool = WorkerPool(scenario, spec["count"], spec["index"], redis, spec["downstream"],
                      clock, lateness)
    await pool.setup()
    last = LastScrape()
    runner, port = await _metrics_site(spec, WorkerCollector(pool, _queue(scenario)), last)
    clock.t0 = (await _handshake(port)).t0
    await pool.run()
    pending = {"id": [j.id for j in pool.in_hand.values()],
               "attempts": [j.attempts for j in pool.in_hand.values()]}
    _save(spec["log"], lateness, events=pool.log, finished=pool.finished, sleeps=pool.sleeps,
          pending=pending, turnaround=pool.turnaround)
    await _finish(spec, last, runner)
    await redis.aclose()


def _queue(scenario) -> str:
    """The ``queue`` label of every series (as ``herdsim export prometheus`` sets it)."""
    return scenario.queue or scenario.name


ROLES = {"server": server, "producer": producer, "workers": workers}


def main(argv: list[str]) -> None:
    role, spec_path = argv
    spec = json.loads(Path(spec_path).read_text())
    scenario = validate(spec["scenario"])
    asyncio.run(ROLES[role](spec, scenario))


if __name__ == "__main__":
    main(sys.argv[1:])

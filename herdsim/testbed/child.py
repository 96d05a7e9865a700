"""One testbed process: ``python -m herdsim.testbed.child ROLE SPEC.json``.

ROLE is ``server``, ``producer`` or ``workers``; SPEC holds the resolved scenario and
where things are (Redis, the downstream, the log file). The handshake with the driver
(:mod:`herdsim.testbed.processes`): the child sets up (connects, binds), prints
``ready PORT`` on stdout, reads ``go T0`` on stdin (the run's ``t0``, a
``time.monotonic()`` instant), runs the scenario until its end, writes its log (an
``.npz`` of flat arrays) and exits 0. It dies with the driver (a parent-death signal
armed before it starts, see :mod:`herdsim.outputs.children`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

from herdsim.config.scenario import validate
from herdsim.testbed.emulator import Emulator
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
    with open(path + ".part", "wb") as stream:
        np.savez(stream, **arrays)  # type: ignore[arg-type]  # numpy's stub: allow_pickle
    Path(path + ".part").replace(path)


async def server(spec: dict, scenario) -> None:
    lateness = Lateness()
    clock = Clock(0.0)
    emulator = Emulator(scenario, clock, lateness)
    runner, port = await start_site(make_app(emulator), "127.0.0.1", 0)
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
    await runner.cleanup()


async def producer(spec: dict, scenario) -> None:
    redis = aioredis.Redis.from_url(spec["redis"])
    await redis.ping()
    lateness = Lateness()
    clock = await _handshake()
    work = Producer(scenario, redis, clock, lateness)
    await work.run()
    _save(spec["log"], lateness, events=work.log)
    await redis.aclose()


async def workers(spec: dict, scenario) -> None:
    redis = aioredis.Redis.from_url(spec["redis"], max_connections=spec["count"] + 8)
    await redis.ping()
    lateness = Lateness()
    clock = await _handshake()
    pool = WorkerPool(scenario, spec["count"], spec["index"], redis, spec["downstream"],
                      clock, lateness)
    await pool.run()
    pending = {"id": [j.id for j in pool.in_hand.values()],
               "attempts": [j.attempts for j in pool.in_hand.values()]}
    _save(spec["log"], lateness, events=pool.log, finished=pool.finished, sleeps=pool.sleeps,
          pending=pending)
    await redis.aclose()


ROLES = {"server": server, "producer": producer, "workers": workers}


def main(argv: list[str]) -> None:
    role, spec_path = argv
    spec = json.loads(Path(spec_path).read_text())
    scenario = validate(spec["scenario"])
    asyncio.run(ROLES[role](spec, scenario))


if __name__ == "__main__":
    main(sys.argv[1:])

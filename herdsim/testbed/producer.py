"""The producer process: jobs onto the main queue at the workload's times, the delayed
set's poller, and the queue gauges.

Arrival times and poison marks come from the simulation's own ``arrivals`` and
``poison`` streams (:func:`~herdsim.model.workload.clock`), so the real run
receives the jobs the simulated one does. Each job is logged at the time it was pushed;
how far that was behind its arrival time is the producer's lateness. The poller moves
due retries back every ``workers.poll_interval``; the gauges (main-queue length, delayed
set size) are read at every bin start.
"""

from __future__ import annotations

import asyncio
from array import array

from herdsim.config.scenario import Scenario
from herdsim.model.streams import draws, generators
from herdsim.model.workload import clock as arrival_clock_of
from herdsim.testbed.jobs import DELAYED, DLQ, MAIN, PUSH_LIMITED, WireJob, move_due
from herdsim.testbed.timing import Clock, Lateness


class Producer:
    """What one producer process does and logs."""

    def __init__(self, scenario: Scenario, redis, clock: Clock, lateness: Lateness):
        self.scenario = scenario
        self.redis = redis
        self.clock = clock
        self.lateness = lateness
        self.log = {"arrivals": array("d"), "refused": array("d"), "queue_depth": array("d"),
                    "delayed": array("d")}
        self.dlq_depth = array("d")  # for /metrics only (the run counts its dead letters)

    async def run(self) -> None:
        end = self.scenario.duration
        await asyncio.gather(self._arrivals(end), self._poller(end), self._gauges(end),
                             self.lateness.probe_loop(self.clock, end))

    async def _arrivals(self, end: float) -> None:
        sc = self.scenario
        rngs = generators(sc.seed)
        arrival_clock = arrival_clock_of(
            sc.workload, lambda n: rngs["arrivals"].exponential(1.0, n))  # any arrivals
        poison = draws(lambda n: rngs["poison"].random(n))
        fraction = sc.workload.poison_fraction
        drift = self.lateness.samples["producer"]

        def marked() -> bool:
            return bool(fraction) and poison() < fraction

        await self._push([marked() for _ in range(sc.workload.backlog)], 0.0)
        while arrival_clock.next_at < end:
            await self.clock.sleep_until(arrival_clock.next_at)
            now = self.clock.now()
            batch = []
            while arrival_clock.next_at <= now and arrival_clock.next_at < end:
                for _ in range(arrival_clock.burst):
                    drift.append(now - arrival_clock.next_at)
                    batch.append(marked())
                arrival_clock.advance()
            await self._push(batch, now)

    def _payload(self, poison: bool) -> bytes:
        """The next job's payload: ids count the jobs accepted, from 0."""
        job = WireJob(len(self.log["arrivals"]), poison, 0, 0, self.scenario.retry.base)
        return job.encode()

    async def _push(self, poison: list[bool], now: float) -> None:
        limit = self.scenario.workload.queue_limit
        if limit is None:
            if poison:
                payloads = []
                for flag in poison:
                    payloads.append(self._payload(flag))
                    self.log["arrivals"].append(now)
                await self.redis.rpush(MAIN, *payloads)
            return
        for flag in poison:
            if await self.redis.eval(PUSH_LIMITED, 1, MAIN, limit, self._payload(flag)):
                self.log["arrivals"].append(now)
            else:
                self.log["refused"].append(now)

    async def _poller(self, end: float) -> None:
        interval = self.scenario.workers.poll_interval
        late = self.lateness.samples["timer"]
        k = 1
        while k * interval < end:
            await self.clock.sleep_until(k * interval, late)
            await move_due(self.redis, k * interval)
            k += 1

    async def _gauges(self, end: float) -> None:
        width = self.scenario.bin
        k = 0
        while k * width < end:
            await self.clock.sleep_until(k * width)
            async with self.redis.pipeline(transaction=False) as pipe:
                depth, delayed, dead = await pipe.llen(MAIN).zcard(DELAYED).llen(DLQ).execute()
            self.log["queue_depth"].append(depth)
            self.log["delayed"].append(delayed)
            self.dlq_depth.append(dead)
            k += 1

"""The main queue (a deque-backed FIFO store) and the delayed queue (Redis ``ZADD`` style).

``simpy.Store`` pops with ``list.pop(0)``, which makes a large backlog quadratic; this
store keeps items in a deque and hands a job straight to a waiting getter.
"""

from __future__ import annotations

import heapq
from collections import deque

import simpy


class JobQueue:
    """FIFO of jobs. Consumers pop ``items`` directly when it is non-empty, else ``get()``."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.items: deque = deque()
        self._getters: deque[simpy.Event] = deque()

    def put(self, job) -> None:
        if self._getters:
            self._getters.popleft().succeed(job)
        else:
            self.items.append(job)

    def get(self) -> simpy.Event:
        """An event whose value is the next job."""
        event = simpy.Event(self.env)
        self._getters.append(event)
        return event

    def __len__(self) -> int:
        return len(self.items)


class DelayedQueue:
    """Jobs parked until a due time; a poller moves due ones back every ``poll_interval``."""

    def __init__(self, env: simpy.Environment, target: JobQueue, poll_interval: float):
        self.env = env
        self._heap: list[tuple[float, int, object]] = []
        self._seq = 0
        self._target = target
        self._poll_interval = poll_interval
        env.process(self._poll())

    def add(self, due: float, job) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, job))

    def _poll(self):
        heap, put, now_of = self._heap, self._target.put, self.env
        while True:
            yield self.env.timeout(self._poll_interval)
            now = now_of.now
            while heap and heap[0][0] <= now:
                put(heapq.heappop(heap)[2])

    def jobs(self) -> list:
        return [entry[2] for entry in self._heap]

    def __len__(self) -> int:
        return len(self._heap)

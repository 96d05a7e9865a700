"""The main queue (a deque-backed FIFO store) and the delayed queue (Redis ``ZADD`` style).

``simpy.Store`` pops with ``list.pop(0)``, which makes a large backlog quadratic; this
store keeps items in a deque and hands a job straight to a waiting getter, and lets the
first idle worker wait on the next arrival's timer (see :class:`JobQueue`).
"""

from __future__ import annotations

import heapq
from collections import deque

import simpy


class JobQueue:
    """FIFO of jobs. Consumers pop ``items`` directly when it is non-empty, else ``get()``.

    Idle workers wait in line (FIFO). The arrival clock ``arm``s the queue with the timer
    of the next arrival: the first worker in line then waits on that timer itself (its
    resume callback is moved onto it) and gets the arriving job as the timer's value, one
    event in all. A job ``put`` while a worker waits on the timer goes to that worker at
    once, and the timer passes to the next in line. Workers waiting for a job are never
    interrupted (only calls in flight are), which this relies on.
    """

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.items: deque = deque()
        self._getters: deque[simpy.Event] = deque()
        self._timer: simpy.Event | None = None  # the next arrival's, while it is pending
        self._waited = False  # whether a worker waits on ``_timer``

    def arm(self, timer: simpy.Event) -> None:
        """*timer* is the next arrival's: the first worker in line (if any) waits on it."""
        self._timer = timer
        self._waited = False
        if self._getters:
            self._move(self._getters.popleft(), timer)
            self._waited = True

    def disarm(self, timer: simpy.Event) -> bool:
        """*timer* fires: whether a worker waits on it (it receives ``timer._value``)."""
        waited = self._waited and self._timer is timer
        self._timer = None
        self._waited = False
        return waited

    def put(self, job) -> None:
        if self._waited:  # the worker waiting on the arrival timer is first in line
            timer = self._timer
            event = simpy.Event(self.env)
            self._move(timer, event)
            self._waited = False
            if self._getters:
                self._move(self._getters.popleft(), timer)
                self._waited = True
            event.succeed(job)
        elif self._getters:
            self._getters.popleft().succeed(job)
        else:
            self.items.append(job)

    def get(self) -> simpy.Event:
        """An event whose value is the next job: the arrival timer if nobody waits on it."""
        timer = self._timer
        if timer is not None and not self._waited:
            self._waited = True
            return timer
        event = simpy.Event(self.env)
        self._getters.append(event)
        return event

    @staticmethod
    def _move(source: simpy.Event, target: simpy.Event) -> None:
        """Make the worker waiting on *source* wait on *target* instead."""
        resume = source.callbacks.pop()  # a worker's resume is its event's last callback
        target.callbacks.append(resume)
        resume.__self__._target = target

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

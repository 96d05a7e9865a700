"""The main queue (a deque-backed FIFO store) and the delayed queue (Redis ``ZADD`` style).

``simpy.Store`` pops with ``list.pop(0)``, which makes a large backlog quadratic; this
store keeps items in a deque, and takes its arrivals from the arrival clock only when
someone looks (see :class:`JobQueue`). A job that arrives and waits in line is kept as its
id alone, consecutive ones as one :class:`Fresh` run, until a worker takes it: an outage's
backlog of a million jobs costs a few runs instead of a million ``Job`` objects.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from itertools import repeat

import simpy

from herdsim.model.kernel import Alarm, Timer, trigger_later, unfired
from herdsim.model.workload import Clock, Job

NewJob = Callable[..., "Job | int | None"]
"""``new_job(t, lazy)``: the job arriving at *t* (None: refused); with *lazy*, a plain one
as its id alone (the queue makes it with ``make(id)`` when it hands it out). A keyed queue
calls ``new_job(t)`` only."""


class Fresh:
    """Jobs ``first`` … ``end - 1`` waiting in line as they arrived: consecutive ids, no
    ``Job`` made yet."""

    __slots__ = ("first", "end")

    def __init__(self, job_id: int):
        self.first = job_id
        self.end = job_id + 1


class JobQueue:
    """FIFO of jobs fed by an arrival clock (:data:`~herdsim.model.workload.Clock`).

    Arrivals cost no event while nobody waits for them: every reader lets in first, in
    time order and at their own times, the jobs that have arrived since (``new_job(t)``
    records each one, or refuses it when the queue is full): ``take(now)`` hands out the
    next job, or None when there is none (then ``get()``), ``depth(now)`` counts them and
    ``jobs(until)`` lists them at the end of a run. A plain new job (``new_job`` gave its
    id) that waits in line stays an id in a :class:`Fresh` run; ``make(id)`` turns it
    into its ``Job`` when it is handed out. Idle workers wait in line, the longest idle
    first; with *newest_first* the last to go idle comes first (workers that are all
    alike, the plain loop's: which one takes a job changes no number, and the one that
    went idle last still has its memory in cache). The first one waits on a timer set
    for the next arrival and receives its first job as the timer's value, one event in
    all. A job ``put`` while a worker waits on that timer goes to that worker at once,
    and the timer passes to the next in line. A worker's
    resume callback moves between these events without the event its process waits on
    (what an interrupt would detach it from) following: workers waiting for a job are
    never interrupted (only calls in flight are), and the next event a worker yields
    sets it again.
    """

    def __init__(self, env: simpy.Environment, clock: Clock | None, new_job: NewJob,
                 make: Callable[[int], Job] | None = None, newest_first: bool = False):
        self.env = env
        # the next arrival's time (None: no arrivals, as in open loop, where the clock
        # feeds callers)
        self.burst = clock.burst if clock is not None else 1
        self._next_time = (clock.times() if clock is not None else repeat(math.inf)).__next__
        self.next_at = self._next_time()
        self.new_job = new_job
        self.make = make  # None: new_job never gives an id
        self._items: deque = deque()  # jobs and Fresh runs, in line order
        self._runs = 0  # Fresh runs in line
        self._tail = Fresh(-1)  # the run made last (in line or not)
        self._more = 0  # jobs in line beyond one an item: each run's length - 1
        # Idle workers in line: one event nobody fires, its callbacks a deque of their
        # resumes (a worker appends its resume to whatever it waits on), oldest first.
        self._line = Timer()
        self._line.callbacks = self._waiting = deque[Callable[[Timer], None]]()
        # the idle worker a job goes to: the longest idle, or with *newest_first* (for
        # interchangeable workers) the last to go idle, whose memory is still in cache
        self._next_idle = self._waiting.pop if newest_first else self._waiting.popleft
        self._alarm = Alarm(env, self._arrive)  # the arrival timer, set again for each
        self._timer: Timer | None = None  # the alarm while it is set for the next arrival
        self._waited = False  # whether a worker waits on ``_timer``

    def take(self, now: float):
        """The next job at *now*, or None when the queue is empty (then ``get()``)."""
        if self.next_at <= now and not self._waited:
            self._let_in(now)
        items = self._items
        if not items:
            return None
        if not self._runs or items[0].__class__ is not Fresh:
            return items.popleft()
        run = items[0]
        job_id = run.first
        if run.end - job_id == 1:
            items.popleft()
            self._runs -= 1
        else:
            run.first = job_id + 1
            self._more -= 1
        return self.make(job_id)  # type: ignore[misc]  # a run holds ids: make is set

    def depth(self, now: float) -> int:
        """How many jobs are queued at *now*."""
        self.catch_up(now)
        return len(self._items) + self._more

    def jobs(self, until: float | None, fresh: bool = True) -> list:
        """The jobs queued just before *until* (the end of a run), in line order; with
        None, those queued now (open loop: the clock feeds callers, not this queue).
        Without *fresh*, less those still waiting as they arrived (no ``Job`` is made for
        them: their rows need nothing but their ids)."""
        if until is not None:
            self.catch_up(until, until_before=True)
        jobs = []
        for item in self._items:
            if item.__class__ is not Fresh:
                jobs.append(item)
            elif fresh:
                jobs.extend(map(self.make, range(item.first, item.end)))  # type: ignore[arg-type]  # ids: make is set
        return jobs

    def catch_up(self, now: float, until_before: bool = False) -> None:
        """Let in every job arriving at or before *now* (before *now*, if *until_before*).

        While a worker waits on the arrival timer the queue is empty and the next arrival is
        not before *now*; one due at *now* is left to the timer and its worker."""
        if not self._waited:
            self._let_in(now, until_before)

    def _let_in(self, now: float, until_before: bool = False, first=None) -> None:
        """The arrivals due by *now*, in time order: the first accepted job becomes the
        value of the event *first* (if given), the others are ``put``, or lined up
        (``_line_up``) while nobody waits for them."""
        new_job, put, next_time = self.new_job, self.put, self._next_time
        while self.next_at < now or (self.next_at == now and not until_before):
            t = self.next_at
            for _ in range(self.burst):
                if first is None and not self._waited and not self._waiting:
                    self._line_up(new_job(t, True))
                    continue
                job = new_job(t, False)
                if job is None:
                    continue
                if first is not None:
                    first.value = job
                    first = None
                else:
                    put(job)
            self.next_at = next_time()

    def _line_up(self, job: Job | int | None) -> None:
        """Queue a new job nobody waits for (``put`` would): a plain one (an id) joins the
        last run in line, or starts one."""
        items, tail = self._items, self._tail
        if items and items[-1] is tail and job == tail.end:  # the next id: extend the run
            tail.end = job + 1  # type: ignore[operator]  # an id
            self._more += 1
        elif job.__class__ is int:
            self._tail = Fresh(job)  # type: ignore[arg-type]  # an id
            items.append(self._tail)
            self._runs += 1
        elif job is not None:
            items.append(job)

    def _arm(self) -> None:
        """Set the timer of the next arrival; the first worker in line waits on it."""
        self._timer = timer = self._alarm
        timer.set(self.next_at)
        self._waited = False
        if self._waiting:
            timer.callbacks.append(self._next_idle())
            self._waited = True

    def _arrive(self, timer: Timer) -> None:
        """The timer fires: its waiting worker (resumed after this) gets the first job."""
        waited = self._waited and self._timer is timer
        if self._timer is timer:
            self._timer = None
            self._waited = False
        # (A waiting worker gets a job, or with keys None when every arrival collapsed:
        # it waits only while the queue is empty, and a main-queue limit is at least 1.)
        if waited:
            timer.value = None  # (the alarm keeps the last one's)
        self._let_in(self.env.now, first=timer if waited else None)
        if self._waiting and self._timer is None:
            self._arm()

    def put(self, job) -> None:
        if self._waited:  # the worker waiting on the arrival timer is first in line
            timer: Timer = self._timer  # type: ignore[assignment]  # armed while one waits
            event = unfired()
            event.callbacks.append(timer.callbacks.pop())  # its resume: the last callback
            self._waited = False
            if self._waiting:
                timer.callbacks.append(self._next_idle())
                self._waited = True
            trigger_later(self.env, event, job)
        elif self._waiting:
            event = unfired()
            event.callbacks.append(self._next_idle())
            trigger_later(self.env, event, job)
        else:
            self._items.append(job)

    def dismiss(self, n: int) -> int:
        """Take up to *n* idle workers out of line, the last in line first; how many went.
        (A dismissed worker's process is never resumed: it ends where it waited.)"""
        gone = 0
        while gone < n and self._waiting:
            self._waiting.pop()
            gone += 1
        if gone < n and self._waited:  # the first in line waits on the arrival timer
            self._timer.callbacks.pop()  # type: ignore[union-attr]  # armed while waited on
            self._waited = False
            gone += 1
        return gone

    def get(self) -> Timer:
        """An event whose value is the next job: the arrival timer if nobody waits on it.

        Call it only when ``take(now)`` found the queue empty."""
        if self._timer is None:
            self._arm()
        if not self._waited:
            self._waited = True
            return self._timer  # type: ignore[return-value]  # armed just above
        return self._line

    def __len__(self) -> int:
        """The jobs queued, without letting any in (as ``new_job`` sees the queue)."""
        return len(self._items) + self._more


class DelayedQueue:
    """Jobs parked until a due time; a poller moves due ones back every ``poll_interval``."""

    def __init__(self, env: simpy.Environment, target: JobQueue, poll_interval: float):
        self.env = env
        self._heap: list[tuple[float, int, object]] = []
        self._seq = 0
        self._into = target
        self._poll_interval = poll_interval
        env.process(self._poll())

    def add(self, due: float, job) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, job))

    def _poll(self):
        heap, target, env = self._heap, self._into, self.env
        while True:
            yield env.timeout(self._poll_interval)
            now = env.now
            if heap and heap[0][0] <= now:
                target.catch_up(now)  # jobs that arrived first are ahead in line
                while heap and heap[0][0] <= now:
                    target.put(heapq.heappop(heap)[2])

    def jobs(self) -> list:
        return [entry[2] for entry in self._heap]

    def __len__(self) -> int:
        return len(self._heap)


class KeyedQueue(JobQueue):
    """The main queue with client-go's workqueue rules (``workload.keys``): a job's key is
    the item, a job the message that made its key dirty.

    ``queue.go`` @v0.36.3 (``Add`` :227-251, ``Get`` :265-284, ``Done`` :289-302): a job
    whose key is dirty (queued, or added again while in process) collapses into it:
    ``merge(job, t)`` records it at *t* and it ends there. A job whose key is in process
    (a worker holds a job of that key) makes the key dirty and is *held*: ``done(job)``
    (the worker lets go of the job) queues it at the tail. Handing a job out (``take``, a
    waiting worker's timer, a ``put`` to an idle worker) is ``Get``: its key moves from
    dirty to in process. ``depth`` counts the queued jobs only (``Len``: held ones are
    not in the queue). Every job comes as a ``Job`` (its key is drawn as it arrives).
    """

    new_job: Callable[[float], Job | None]

    def __init__(self, env: simpy.Environment, clock: Clock | None,
                 new_job: Callable[[float], Job | None], merge):
        super().__init__(env, clock, new_job)
        self.merge = merge
        self.queued: set = set()  # dirty keys in line
        self.held: dict = {}  # dirty keys in process -> the job done() queues
        self.processing: set = set()

    def take(self, now: float):
        job = super().take(now)
        if job is not None:
            self.queued.discard(job.key)
            self.processing.add(job.key)
        return job

    def jobs(self, until: float | None, fresh: bool = True) -> list:
        return [*super().jobs(until, fresh), *self.held.values()]

    def put(self, job) -> None:
        self._add(job, self.env.now)

    def done(self, job) -> None:
        """A worker lets go of *job* (``Done``): its key is no longer in process, and the
        job held for it, if any, joins the queue."""
        now = self.env.now
        self.catch_up(now)  # arrivals up to now saw the key in process
        key = job.key
        self.processing.discard(key)
        held = self.held.pop(key, None)
        if held is not None:
            self._add(held, now)

    def _add(self, job, t: float) -> None:
        """``Add`` at *t*: collapse, hold, hand to an idle worker, or queue."""
        key = job.key
        if key in self.queued or key in self.held:
            self.merge(job, t)
        elif key in self.processing:
            self.held[key] = job
        else:
            if self._waited or self._waiting:  # JobQueue.put hands it out at once
                self.processing.add(key)
            else:
                self.queued.add(key)
            JobQueue.put(self, job)

    def _let_in(self, now: float, until_before: bool = False, first=None) -> None:
        """As :meth:`JobQueue._let_in`, every arrival through ``Add`` at its own time; the
        event *first* gets the first one that would be queued (none, when every arrival
        collapses or is held: its worker then waits again)."""
        new_job, add, next_time = self.new_job, self._add, self._next_time
        while self.next_at < now or (self.next_at == now and not until_before):
            t = self.next_at
            for _ in range(self.burst):
                job = new_job(t)
                if job is None:
                    continue
                key = job.key
                if first is not None and key not in self.queued and key not in self.held \
                        and key not in self.processing:
                    self.processing.add(key)
                    first.value = job
                    first = None
                else:
                    add(job, t)
            self.next_at = next_time()


class KeyedDelayedQueue(DelayedQueue):
    """The delayed queue with ``delaying_queue.go``'s ``insert`` (@v0.36.3 :355-369): a
    key already waiting keeps one entry, at the earlier of the two ready times; the job
    parked second collapses into it (``merge(job, now)``)."""

    def __init__(self, env: simpy.Environment, target: JobQueue, poll_interval: float,
                 merge):
        super().__init__(env, target, poll_interval)
        self.merge = merge
        self._live: dict = {}  # key -> its entry in the heap; other entries are stale

    def add(self, due: float, job) -> None:
        live = self._live.get(job.key)
        if live is not None:
            self.merge(job, self.env.now)
            if due >= live[0]:
                return
            job = live[2]  # the waiting job moves to the earlier time
        self._seq += 1
        self._live[job.key] = entry = (due, self._seq, job)
        heapq.heappush(self._heap, entry)

    def _poll(self):
        heap, target, env, live = self._heap, self._into, self.env, self._live
        while True:
            yield env.timeout(self._poll_interval)
            now = env.now
            if heap and heap[0][0] <= now:
                target.catch_up(now)
                while heap and heap[0][0] <= now:
                    entry = heapq.heappop(heap)
                    key = entry[2].key
                    if live.get(key) is entry:
                        del live[key]
                        target.put(entry[2])

    def jobs(self) -> list:
        return [entry[2] for entry in self._live.values()]

    def __len__(self) -> int:
        return len(self._live)

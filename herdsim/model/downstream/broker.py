"""Connection herds (``downstream.model: broker``): clients that hold a connection to a
broker and reconnect, each with its own backoff, when it drops.

``workers.count`` clients start connected. What drops the connections: an outage that
refuses (``down``: at its start), a ``blackhole`` (``broker.keepalive`` after its start,
when the clients notice the silence) and a crash of ``overload.collapse`` (too many
connects within its window, or too many in handshake: every connection and handshake
drops, the broker refuses for ``restart_time``). A dropped client is a *job* (its
disconnection): it sleeps its ``retry`` strategy's backoff (retry 0 first), connects,
and on a refusal, a failure or its connect ``timeout`` sleeps the next one
(``max_retries`` reached: it gives up for good, dead-lettered). A connect:

* is refused at once while the broker is down or crashed, or when ``max_connections``
  are open (established plus in handshake), or the accept backlog (``queue_limit``)
  is full;
* hangs while a blackhole holds (the client's ``timeout`` ends it; a handshake served
  then is wasted, its answer lost);
* else takes one of ``concurrency`` handshake slots for a ``service`` time (× a slow
  outage's factor), waiting FIFO for one. Served: the client is connected (its job
  succeeds), unless an error outage fails it or its client gave up (``wasted``; with
  ``serve_abandoned: false`` the broker skips a waiting connect whose client is gone).

No SimPy and no process per client: clients are flat arrays of state, and a connect
attempt, a served handshake, an outage's edge are entries of one event heap; the
timeouts, all of one length, fall due in arming order, so one FIFO holds them. A million
clients fit (``benchmarks/reconnect.py``). Connected clients send nothing: the model is
the connection herd alone.
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from collections import deque
from dataclasses import dataclass

import numpy as np

from herdsim.config.scenario import Scenario
from herdsim.model.downstream.collapse import CollapseGuard
from herdsim.model.downstream.family import Progress
from herdsim.model.finished import Finished
from herdsim.model.recorder import DEAD_LETTERED, SUCCEEDED, Recorder
from herdsim.model.streams import draws, generators
from herdsim.model.workload import Job, make_job
from herdsim.policies.downstreams import Broker
from herdsim.policies.outages.base import OutageState

# event kinds, in the heap as (time, seq, kind, client or outage, token)
_CONNECT, _SERVED, _BEGIN, _END, _NOTICE, _RESTART = range(6)
# a client's state
BACKING_OFF, CONNECTING, CONNECTED, GONE = 0, 1, 2, 3
# the time-series columns the model adds (events per bin) and its gauge
COUNTERS = ("connects", "connects_accepted", "connects_refused", "disconnects")
GAUGE = "connected"


@dataclass
class Herd:
    """What one run produced beyond the recorder's arrays."""

    clients: int
    state: bytearray  # each client's state at the end
    last_drop: float | None  # when connections last dropped
    all_back: float | None  # when every client was connected again after it

    def pending(self, job: array, retries: array, base: float) -> list[Job]:
        """The disconnections not over when the run stopped (their clients backing off
        or connecting), as jobs with their connect attempts."""
        codes = np.frombuffer(self.state, dtype=np.uint8)
        out = []
        for x in np.flatnonzero(codes <= CONNECTING).tolist():
            one = make_job(job[x], False, base)
            one.attempts = retries[x]
            out.append(one)
        return out


def reconnect(scenario: Scenario, recorder: Recorder) -> tuple[Herd, list[Job]]:
    """Run the connection herd of *scenario* until ``duration``, appending what happens
    to *recorder*; the herd and the disconnections still pending."""
    cfg = scenario.downstream
    own = Broker.fields(cfg.broker)
    retry = scenario.retry
    rngs = generators(scenario.seed)
    service = draws(cfg.service.sampler(rngs["service"]))
    error_draw = draws(lambda k: rngs["outages"].random(k))
    strategy = retry.build()
    sleep, stateful, rng = strategy.sleep, strategy.stateful, rngs["strategy"]
    max_retries, until, base = retry.max_retries, scenario.duration, retry.base
    slots, room, limit = cfg.concurrency, cfg.queue_limit, own.max_connections
    timeout, serve_abandoned, keepalive = cfg.timeout, cfg.serve_abandoned, own.keepalive
    collapse = cfg.overload.collapse
    guard = CollapseGuard(collapse) if collapse is not None else None
    n = scenario.workers.count or 0
    width, n_bins = scenario.bin, max(1, math.ceil(until / scenario.bin - 1e-9))

    state = bytearray([CONNECTED]) * n
    codes = np.frombuffer(state, dtype=np.uint8)  # a view: the same bytes
    retries = array("i", bytes(4 * n))  # connect attempts in this disconnection
    prev = array("d", [base]) * n  # the strategy's memory
    token = array("q", bytes(8 * n))  # the connect each client waits on (-1: none)
    job = array("q", bytes(8 * n))  # each client's disconnection (its job id)

    attempts, refused = recorder.attempts, recorder.rejected
    recorder.optional["connects"] = attempts  # the same arrays under the model's names
    accepted = recorder.counter("connects_accepted")
    recorder.optional["connects_refused"] = refused
    recorder.optional["disconnects"] = recorder.arrivals
    arrivals = recorder.arrivals
    gauges = recorder.gauges
    gauges[GAUGE] = []
    heap: list[tuple] = []
    outages = cfg.outages
    for i, outage in enumerate(outages):
        heap.append((outage.start, -2 * len(outages) + 2 * i, _BEGIN, i, 0))
        heap.append((outage.end, -2 * len(outages) + 2 * i + 1, _END, i, 0))
    heapq.heapify(heap)
    health = OutageState()
    seq = 0  # tie-breaker of heap entries and connect tokens, one counter
    killed_below = 0  # handshakes with an older token died in a drop
    crashed = busy = connected = backing = 0
    opened = n  # connections open: established + in handshake
    connected = n
    waiting: deque[tuple[int, int]] = deque()  # (token, client) waiting for a slot
    due: deque[tuple[float, int, int]] = deque()  # (deadline, token, client), in order
    last_drop: float | None = None
    all_back: float | None = None
    push, pop = heapq.heappush, heapq.heappop

    def finish(x: int, at: float, outcome: int) -> None:
        recorder.finish_id.append(job[x])
        recorder.finish_time.append(at)
        recorder.finish_attempts.append(retries[x])
        recorder.finish_outcome.append(outcome)

    def back_off(x: int, at: float) -> None:
        nonlocal seq, backing
        token[x] = -1  # it waits on no connect now (one still served is wasted)
        k = retries[x]
        if max_retries is not None and k >= max_retries:
            state[x] = GONE
            finish(x, at, DEAD_LETTERED)
            return
        if stateful:
            pause, prev[x] = sleep(k, prev[x], rng)  # type: ignore[misc]  # a pair
        else:
            pause = prev[x] = sleep(k, prev[x], rng)
        recorder.record_sleep(at, job[x], k, pause)
        state[x] = BACKING_OFF
        backing += 1
        seq += 1
        push(heap, (at + pause, seq, _CONNECT, x, 0))

    def drop(at: float, everything: bool) -> None:
        """Connections drop at *at*; with *everything* the handshakes too (the broker
        went away: a down outage, a crash)."""
        nonlocal connected, opened, busy, killed_below, last_drop
        if everything:
            killed_below = seq + 1
            busy = 0
            waiting.clear()
            for x in np.flatnonzero(codes == CONNECTING).tolist():
                recorder.errors.append(at)  # a connect reset: its client's next retry
                back_off(x, at)
            opened = connected
        hit = np.flatnonzero(codes == CONNECTED).tolist()
        if not hit:
            return
        last_drop = at
        first = len(arrivals)
        arrivals.extend([at] * len(hit))
        for i, x in enumerate(hit):
            job[x] = first + i
            retries[x] = 0
            prev[x] = base
            back_off(x, at)
        opened -= len(hit)
        connected = 0

    def start(tok: int, x: int, at: float) -> None:
        nonlocal busy, seq
        busy += 1
        seq += 1
        push(heap, (at + service() * health.slow, seq, _SERVED, x, tok))

    def connect(x: int, at: float) -> None:
        nonlocal seq, opened
        attempts.append(at)
        retries[x] += 1
        if health.down or crashed or (limit is not None and opened >= limit) or (
                room is not None and busy >= slots and len(waiting) >= room):
            refused.append(at)
            back_off(x, at)
            return
        if guard is not None and guard.overloaded(at, busy + len(waiting)):
            crash(at)
            refused.append(at)
            back_off(x, at)
            return
        seq += 1
        state[x] = CONNECTING
        token[x] = seq
        if timeout is not None:
            due.append((at + timeout, seq, x))
        if health.blackhole:
            return  # no answer: its timeout ends it
        opened += 1
        if busy < slots:
            start(seq, x, at)
        else:
            waiting.append((seq, x))

    def crash(at: float) -> None:
        nonlocal crashed, seq
        recorder.crashes.append(at)
        crashed += 1
        guard.clear()  # type: ignore[union-attr]  # crashes only with a guard
        drop(at, True)
        seq += 1
        push(heap, (at + collapse.restart_time, seq, _RESTART, 0, 0))  # type: ignore[union-attr]

    def served(x: int, tok: int, at: float) -> None:
        nonlocal busy, opened, connected, all_back
        busy -= 1
        opened -= 1
        while waiting:
            wtok, wx = waiting.popleft()
            if serve_abandoned or token[wx] == wtok:
                start(wtok, wx, at)
                break
            opened -= 1  # its client is gone: skipped, at no cost
        if token[x] != tok or health.blackhole:
            # served after its client gave up, or its answer lost in a blackhole (its
            # client's timeout ends the wait)
            recorder.wasted.append(at)
            return
        if health.error_rate and error_draw() < health.error_rate:
            recorder.errors.append(at)
            back_off(x, at)
            return
        state[x] = CONNECTED
        token[x] = -1
        accepted.append(at)
        connected += 1
        opened += 1
        finish(x, at, SUCCEEDED)
        if connected == n:
            all_back = at

    def sample(at_bin: int) -> None:
        gauges["in_flight"].append(busy)
        gauges["waiting"].append(len(waiting))
        gauges["delayed"].append(backing)
        gauges["downstream_up"].append(
            0.0 if health.down or health.blackhole or crashed else 1.0)
        gauges[GAUGE].append(connected)

    next_bin = 0
    while True:
        at = heap[0][0] if heap else math.inf
        if due and due[0][0] <= at:
            deadline, tok, x = due.popleft()
            at = deadline
            event = None
        else:
            event = heap[0] if heap else None
        while next_bin < n_bins and next_bin * width <= at:
            sample(next_bin)
            next_bin += 1
        if at > until:
            break
        if event is None:
            if token[x] == tok:  # still waiting on it: the client gives up
                recorder.timeouts.append(at)
                back_off(x, at)
            continue
        pop(heap)
        _, _, kind, x, tok = event
        if kind == _CONNECT:
            backing -= 1
            connect(x, at)
        elif kind == _SERVED:
            if tok >= killed_below:
                served(x, tok, at)
        elif kind == _BEGIN:
            outage = outages[x]
            outage.begin(health)
            health.refresh()
            if outage.refuses:
                drop(at, True)
            elif outage.needs_timeout:
                seq += 1
                push(heap, (at + keepalive, seq, _NOTICE, x, 0))
        elif kind == _END:
            outages[x].cease(health)
            health.refresh()
        elif kind == _NOTICE:
            if health.blackhole:
                drop(at, False)
        else:  # _RESTART
            crashed -= 1
    for name in ("queue_depth", "breaker_open"):
        gauges[name] = [0.0] * n_bins
    herd = Herd(n, state, last_drop, all_back if connected == n else None)
    return herd, herd.pending(job, retries, base)


def run(scenario: Scenario, progress: Progress | None = None) -> Finished:
    """The ``broker`` model's engine (see :mod:`~herdsim.model.downstream.family`): one
    run of *scenario*; its summary adds ``reconnect_time`` and ``connects_per_drop``,
    reads ``recovery_time`` as every client connected again for good, and has no
    capacity (its calls are connects, not offered jobs). It runs its own event loop:
    *progress* hears only its end."""
    started = time.perf_counter()
    recorder = Recorder()
    herd, pending = reconnect(scenario, recorder)
    wall = time.perf_counter() - started
    n_bins = max(1, math.ceil(scenario.duration / scenario.bin - 1e-9))
    drops = len(recorder.arrivals)
    last = herd.last_drop  # None: no connection ever dropped
    back = herd.all_back if last is not None else None
    ended = scenario.last_outage_end
    extra = {"capacity_rate": None, "peak_to_capacity": None,
             # healthy for good: every client connected, from then to the end
             "recovery_time": None if back is None or ended is None else max(0.0, back - ended),
             "reconnect_time": None if back is None or last is None else back - last,
             "connects_per_drop": len(recorder.attempts) / drops if drops else None}
    if progress is not None:
        progress(scenario.duration, scenario.duration)
    return Finished(scenario, recorder, n_bins, pending, wall, extra=extra)

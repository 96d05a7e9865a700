"""The capacity-limited downstream: slots, a waiting room, outages, a rate limiter, collapse.

A caller does ``r = downstream.call(process)``. ``r`` is an ``int`` outcome when the call
fails fast (down, waiting room full, rate limited); otherwise a :class:`Call` whose
``event`` the caller yields. The event's value is ``COMPLETED`` or ``TIMEOUT``; either way
the caller then hands it to ``finish(call, value)`` for the final outcome. Calls failed
together at t0 (a ``down`` outage or a crash) are interrupted with cause ``FAILED``.

No process is spawned per call: a call costs one scheduled event (two when it waits in
the waiting room under a client timeout).

With ``overload.latency_model: continuous`` a call's service is not fixed when it starts:
every call in service progresses at the common rate r = mean / (mean + latency_per_call
× busy). A virtual clock V (dV/dt = r) orders them in a heap by V_start + draw × slow, and
one timer is kept for the earliest finish, rescheduled whenever ``busy`` changes (stale
timers carry an old generation and do nothing). Such a call's client deadline is always
armed, since whether it will be met is unknown at the start.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush

import simpy

from herdsim.config.scenario import Downstream as DownstreamConfig
from herdsim.model.streams import Draws

# Call outcomes (plain ints: they are compared on the hot path). COMPLETED and DELIVERED
# are event values only: served, with the slot still held (COMPLETED) or already freed
# because the response spent ``network_delay`` on the way back (DELIVERED).
OK, ERROR, TIMEOUT, REJECTED, DOWN, THROTTLED, FAILED, COMPLETED, DELIVERED = range(9)

# Call states. _RUNNING: in service under the continuous model, the client still waiting.
_WAITING, _SERVING, _DOOMED, _ABANDONED, _RUNNING = range(5)


class Call:
    """One downstream call in flight (in service or in the waiting room)."""

    __slots__ = ("proc", "event", "deadline", "state", "epoch")

    def __init__(self, proc, epoch: int, deadline: float):
        self.proc = proc
        self.epoch = epoch
        self.deadline = deadline
        self.event = None
        self.state = _WAITING


class TokenBucket:
    """A rate limiter: ``rate`` tokens per second, at most ``burst`` banked."""

    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst, self.tokens, self.last = rate, burst, burst, 0.0

    def take(self, now: float) -> bool:
        tokens = self.tokens + (now - self.last) * self.rate
        self.last = now
        if tokens > self.burst:
            tokens = self.burst
        if tokens >= 1.0:
            self.tokens = tokens - 1.0
            return True
        self.tokens = tokens
        return False


class Downstream:
    """The service every worker calls. See the module docstring for the protocol."""

    def __init__(self, env: simpy.Environment, cfg: DownstreamConfig, service: Draws,
                 outage_draw: Draws, recorder, network: Draws | None = None):
        self.env = env
        self.concurrency = cfg.concurrency
        self.queue_limit = cfg.queue_limit
        self.timeout = cfg.timeout
        self.serve_abandoned = cfg.serve_abandoned
        self.latency_per_call = cfg.overload.latency_per_call
        self._service = service
        self._network = network
        self._outage_draw = outage_draw
        self.busy = 0
        self.n_waiting = 0
        self._waiting: deque[Call] = deque()
        self.active: dict[Call, None] = {}  # insertion-ordered: failing them is reproducible
        self.epoch = 0
        # Health, recomputed whenever an outage starts or ends.
        self.up = True
        self._down_outages = 0
        self._crashed = False
        self._blackhole = 0
        self.error_rate = 0.0
        self.slow = 1.0
        self._errors_active: list[float] = []
        self._slows_active: list[float] = []
        self.limiter = (TokenBucket(cfg.rate_limit.rate, cfg.rate_limit.burst)
                        if cfg.rate_limit else None)
        collapse = cfg.overload.collapse
        self._collapse = collapse
        self._recent: deque[float] = deque()
        self._guarded = collapse is not None
        # The continuous latency model (see the module docstring).
        self._continuous = cfg.overload.latency_model == "continuous"
        self._mean = cfg.service.mean
        self._heap: list[tuple[float, int, Call]] = []
        self._seq = 0  # heap tie-break: equal finish points leave in start order
        self._vclock = 0.0  # V at time self._vtime
        self._vtime = 0.0
        self._rate = 1.0
        self._generation = 0
        self._settling = False
        # Recorder lists, bound once.
        self._attempts = recorder.attempts.append
        self._rejected = recorder.rejected.append
        self._timeouts = recorder.timeouts.append
        self._wasted = recorder.wasted.append
        self._errors = recorder.errors.append
        self._crashes = recorder.crashes.append
        for outage in cfg.outages:
            env.process(self._outage(outage))
        # The entry point of the call protocol (no wrapper on the hot path without delay).
        self.call = self._admit if network is None else self._call_over_network

    # -- the call protocol ---------------------------------------------------------------

    def _call_over_network(self, proc):
        """``call`` when the network has a delay: a fast failure crosses it too."""
        outcome = self._admit(proc)
        if outcome.__class__ is not int:
            return outcome
        c = Call(proc, self.epoch, None)
        c.event = self.env.timeout(self._network(), outcome)
        return c

    def _admit(self, proc):
        """Start a call on behalf of *proc*: an ``int`` outcome or a :class:`Call`."""
        env = self.env
        now = env._now
        self._attempts(now)
        if not self.up:
            self._rejected(now)
            return DOWN
        if self._blackhole:
            c = Call(proc, self.epoch, now + self.timeout)
            c.event = env.timeout(self.timeout, TIMEOUT)
            return c
        if self.limiter is not None and not self.limiter.take(now):
            self._rejected(now)
            return THROTTLED
        if self._guarded and self._overloaded(now):
            self._crash(now)
            self._rejected(now)
            return DOWN
        timeout = self.timeout
        c = Call(proc, self.epoch, now + timeout if timeout is not None else None)
        if self.busy < self.concurrency:
            self.busy += 1
            self._start(c, now)
        elif self.queue_limit is None or self.n_waiting < self.queue_limit:
            c.event = simpy.Event(env)
            self._waiting.append(c)
            self.n_waiting += 1
            if timeout is not None:
                timer = env.timeout(timeout)
                timer.callbacks.append(self._deadline)
                timer.call = c
        else:
            self._rejected(now)
            return REJECTED
        self.active[c] = None
        return c

    def finish(self, c: Call, value: int) -> int:
        """The outcome of a call whose event fired with *value*."""
        self.active.pop(c, None)
        now = self.env._now
        if value == TIMEOUT:
            self._timeouts(now)
            return TIMEOUT
        if value != COMPLETED and value != DELIVERED:
            return value  # a fast failure that crossed the network
        outcome = OK
        if self.error_rate and self._outage_draw() < self.error_rate:
            self._errors(now)
            outcome = ERROR
        if value == COMPLETED:
            self._free_slot(now)
        return outcome

    # -- internals -------------------------------------------------------------------------

    def _start(self, c: Call, now: float) -> None:
        """Put *c* in service now (a slot is already counted in ``busy``)."""
        if self._continuous:
            self._start_continuous(c, now)
            return
        s = self._service() * self.slow
        if self.latency_per_call:
            s += self.latency_per_call * self.busy
        env = self.env
        if c.state == _ABANDONED:  # served although its client left: pure waste
            self._finish_later(c, s, self._wasted_done)
            return
        deadline = c.deadline
        seen, value = s, COMPLETED
        if self._network is not None:  # the slot frees at s, the client hears at s + delay
            seen, value = s + self._network(), DELIVERED
        if deadline is None or now + seen <= deadline:
            c.state = _SERVING
            if value == DELIVERED:
                self._finish_later(c, s, self._released)
            if c.event is None:
                c.event = env.timeout(seen, value)
            else:
                event = c.event
                event._ok = True
                event._value = value
                env.schedule(event, delay=seen)
            return
        c.state = _DOOMED  # the client gives up first; the server works on
        self._finish_later(c, s, self._wasted_done)
        if c.event is None:
            c.event = env.timeout(deadline - now, TIMEOUT)
        # else: the deadline timer set when it queued will fire the event.

    def _finish_later(self, c: Call, s: float, callback) -> None:
        timer = self.env.timeout(s)
        timer.callbacks.append(callback)
        timer.call = c

    def _released(self, timer) -> None:
        """Server-side end of work whose response is still on the network."""
        if timer.call.epoch == self.epoch:
            self._free_slot(self.env._now)

    def _wasted_done(self, timer) -> None:
        """Server-side end of work nobody waits for any more."""
        if timer.call.epoch == self.epoch:
            now = self.env._now
            self._wasted(now)
            self._free_slot(now)

    def _deadline(self, timer) -> None:
        """A queued call's client timeout fires."""
        c = timer.call
        if c.epoch != self.epoch:
            return
        if c.state == _WAITING:
            c.state = _ABANDONED
            self.n_waiting -= 1
            c.event.succeed(TIMEOUT)
        elif c.state == _DOOMED:
            c.event.succeed(TIMEOUT)
        elif c.state == _RUNNING:  # continuous model: the server works on
            c.state = _DOOMED
            c.event.succeed(TIMEOUT)

    # -- the continuous latency model ------------------------------------------------------

    def _start_continuous(self, c: Call, now: float) -> None:
        """Put *c* in the processor-sharing heap with its work, draw × slow."""
        work = self._service() * self.slow
        self._vclock += (now - self._vtime) * self._rate
        self._vtime = now
        self._seq += 1
        heappush(self._heap, (self._vclock + work, self._seq, c))
        if c.state != _ABANDONED:
            c.state = _RUNNING
            if c.event is None:
                c.event = simpy.Event(self.env)
                if c.deadline is not None:
                    timer = self.env.timeout(c.deadline - now)
                    timer.callbacks.append(self._deadline)
                    timer.call = c
            # else: it waited, and its deadline timer is already armed.
        if not self._settling:
            self._retime()

    def _retime(self) -> None:
        """Set the rate for the current ``busy`` and arm a timer for the heap's head.

        The virtual clock must already be advanced to now.
        """
        self._rate = self._mean / (self._mean + self.latency_per_call * self.busy)
        self._generation += 1
        if self._heap:
            delay = (self._heap[0][0] - self._vclock) / self._rate
            timer = self.env.timeout(delay if delay > 0.0 else 0.0)
            timer.callbacks.append(self._served)
            timer.generation = self._generation

    def _served(self, timer) -> None:
        """The heap's head (and any call tied with it) finishes its work."""
        if timer.generation != self._generation:
            return
        now = self.env._now
        heap = self._heap
        self._vclock = heap[0][0]  # where the timer was aimed (no rounding drift)
        self._vtime = now
        self._settling = True
        while heap and heap[0][0] <= self._vclock:
            c = heappop(heap)[2]
            if c.state == _RUNNING:
                self._deliver(c, now)
            else:  # its client left (doomed) or it was abandoned in the waiting room
                self._wasted(now)
            self._free_slot(now)
        self._settling = False
        self._retime()

    def _deliver(self, c: Call, now: float) -> None:
        """Send a served call's response; its slot is freed by the caller."""
        event = c.event
        if self._network is None:
            c.state = _SERVING
            event.succeed(DELIVERED)
            return
        delay = self._network()
        if c.deadline is not None and now + delay > c.deadline:
            c.state = _DOOMED  # the answer arrives too late; the deadline timer fires
            self._wasted(now)
            return
        c.state = _SERVING
        event._ok = True
        event._value = DELIVERED
        self.env.schedule(event, delay=delay)

    def _free_slot(self, now: float) -> None:
        waiting = self._waiting
        while waiting:
            c = waiting.popleft()
            if c.state == _WAITING:
                self.n_waiting -= 1
                self._start(c, now)
                return
            if self.serve_abandoned:
                self._start(c, now)
                return
        self.busy -= 1

    def _overloaded(self, now: float) -> bool:
        collapse = self._collapse
        if collapse.threshold is not None:
            recent = self._recent
            recent.append(now)
            horizon = now - collapse.window
            while recent[0] <= horizon:
                recent.popleft()
            if len(recent) > collapse.threshold:
                return True
        return collapse.load_limit is not None and self.busy + self.n_waiting >= collapse.load_limit

    def _fail_in_flight(self) -> None:
        """Every call in service or waiting fails now, together (the herd's t0)."""
        self.epoch += 1
        active, self.active = self.active, {}
        for c in active:
            c.proc.interrupt(FAILED)
        self._waiting.clear()
        self.n_waiting = 0
        self.busy = 0
        self._recent.clear()
        if self._continuous:
            self._heap.clear()
            now = self.env._now
            self._vclock += (now - self._vtime) * self._rate
            self._vtime = now
            self._retime()

    def _crash(self, now: float) -> None:
        self._crashes(now)
        self._crashed = True
        self._refresh()
        self._fail_in_flight()
        self.env.process(self._restart())

    def _restart(self):
        yield self.env.timeout(self._collapse.restart_time)
        self._crashed = False
        self._refresh()

    def _refresh(self) -> None:
        self.up = not (self._down_outages or self._crashed)
        failing = 1.0
        for rate in self._errors_active:
            failing *= 1.0 - rate
        self.error_rate = 1.0 - failing
        slow = 1.0
        for factor in self._slows_active:
            slow *= factor
        self.slow = slow

    def _outage(self, outage):
        yield self.env.timeout(outage.start)
        mode = outage.mode
        if mode == "down":
            self._down_outages += 1
            self._fail_in_flight()
        elif mode == "blackhole":
            self._blackhole += 1
        elif mode == "error":
            self._errors_active.append(outage.error_rate)
        else:
            self._slows_active.append(outage.factor)
        self._refresh()
        yield self.env.timeout(outage.duration)
        if mode == "down":
            self._down_outages -= 1
        elif mode == "blackhole":
            self._blackhole -= 1
        elif mode == "error":
            self._errors_active.remove(outage.error_rate)
        else:
            self._slows_active.remove(outage.factor)
        self._refresh()

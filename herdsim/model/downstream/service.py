"""How a call in service is timed: the two ``overload.latency_model`` parts.

Both put a call in service with ``start(call, now)`` (its slot already counted in the
downstream's ``busy``) and hand the slot back with ``downstream.free_slot(now, call)``
when the server-side work ends.

* :class:`AtStart` fixes the service when it starts: draw × slow + latency_per_call ×
  busy. A call costs one scheduled event, or two when its response crosses the network
  (the slot frees first) or its client gives up first (the server works on).
* :class:`ProcessorSharing` (``continuous``): every call in service progresses at the
  common rate r = mean / (mean + latency_per_call × busy). A virtual clock V (dV/dt = r)
  orders them in a heap by V_start + draw × slow, and one timer is kept for the earliest
  finish, rescheduled whenever ``busy`` changes (stale timers carry an old generation and
  do nothing). Such a call's client deadline is always armed, since whether it will be
  met is unknown at the start.
"""

from __future__ import annotations

from heapq import heappop, heappush

from herdsim.model.calls import (
    ABANDONED,
    COMPLETED,
    DELIVERED,
    DOOMED,
    RUNNING,
    SERVING,
    TIMEOUT,
    Call,
)
from herdsim.model.kernel import later, trigger_later, unfired


class AtStart:
    """``latency_model: at_start``: the service time is fixed when service starts."""

    def __init__(self, downstream, draw, latency_per_call: float, network, wasted):
        self.env = downstream.env
        self._ds = downstream
        self._health = downstream.health
        self._draw = draw
        self._per_call = latency_per_call
        self._network = network
        self._wasted = wasted
        # timer callbacks, bound once, not once per timer
        self._on_wasted, self._on_released = self._wasted_done, self._released

    def start(self, c, now: float) -> None:
        """Put *c* in service now."""
        s = self._draw() * self._health.slow
        if self._per_call:
            s += self._per_call * self._ds.busy
        if c.state == ABANDONED:  # served although its client left: pure waste
            self._finish_later(c, s, self._on_wasted)
            return
        env = self.env
        deadline = c.deadline
        seen, value = s, COMPLETED
        if self._network is not None:  # the slot frees at s, the client hears at s + delay
            seen, value = s + self._network(), DELIVERED
        if deadline is None or now + seen <= deadline:
            c.state = SERVING
            if value == DELIVERED:
                self._finish_later(c, s, self._on_released)
            if c.event is None:  # the call is its own event (no waiter yet)
                c.event = c
                c.callbacks = []
            trigger_later(env, c.event, value, seen)
            return
        c.state = DOOMED  # the client gives up first; the server works on
        self._finish_later(c, s, self._on_wasted)
        if c.event is None:
            c.event = later(env, deadline - now, TIMEOUT)
        # else: the deadline timer armed when it queued will fire the event.

    def reset(self, now: float) -> None:
        """Every call in service has failed: nothing is kept here to forget."""

    def _finish_later(self, c, s: float, callback) -> None:
        timer = later(self.env, s)
        timer.callbacks.append(callback)
        timer.call = c

    def _released(self, timer) -> None:
        """Server-side end of work whose response is still on the network."""
        ds = self._ds
        c = timer.call
        if c.epoch == ds.epoch:
            ds.free_slot(self.env.now, c)

    def _wasted_done(self, timer) -> None:
        """Server-side end of work nobody waits for any more."""
        ds = self._ds
        c = timer.call
        if c.epoch == ds.epoch:
            now = self.env.now
            self._wasted(now)
            ds.free_slot(now, c)


class ProcessorSharing:
    """``latency_model: continuous``: calls in service slow down together (see above)."""

    def __init__(self, downstream, draw, mean: float, latency_per_call: float, network,
                 wasted):
        self.env = downstream.env
        self._ds = downstream
        self._health = downstream.health
        self._draw = draw
        self._mean = mean
        self._per_call = latency_per_call
        self._network = network
        self._wasted = wasted
        self.heap: list[tuple[float, int, Call]] = []
        self._seq = 0  # heap tie-break: equal finish points leave in start order
        self._vclock = 0.0  # V at time self._vtime
        self._vtime = 0.0
        self._rate = 1.0
        self._generation = 0
        self._settling = False
        self._on_served = self._served  # bound once, not once per timer

    def start(self, c, now: float) -> None:
        """Put *c* in the processor-sharing heap with its work, draw × slow."""
        work = self._draw() * self._health.slow
        self._vclock += (now - self._vtime) * self._rate
        self._vtime = now
        self._seq += 1
        heappush(self.heap, (self._vclock + work, self._seq, c))
        if c.state != ABANDONED:
            c.state = RUNNING
            if c.event is None:
                c.event = unfired()
                if c.deadline is not None:
                    self._ds.arm_deadline(c)
            # else: it waited, and its deadline timer is already armed.
        if not self._settling:
            self._retime()

    def reset(self, now: float) -> None:
        """Every call in service has failed: empty the heap, keep the virtual clock."""
        self.heap.clear()
        self._vclock += (now - self._vtime) * self._rate
        self._vtime = now
        self._retime()

    def _retime(self) -> None:
        """Set the rate for the current ``busy`` and arm a timer for the heap's head.

        The virtual clock must already be advanced to now.
        """
        self._rate = self._mean / (self._mean + self._per_call * self._ds.busy)
        self._generation += 1
        if self.heap:
            delay = (self.heap[0][0] - self._vclock) / self._rate
            timer = self.env.timeout(delay if delay > 0.0 else 0.0)
            timer.callbacks.append(self._on_served)
            timer.generation = self._generation

    def _served(self, timer) -> None:
        """The heap's head (and any call tied with it) finishes its work."""
        if timer.generation != self._generation:
            return
        now = self.env.now
        heap = self.heap
        free_slot = self._ds.free_slot
        self._vclock = heap[0][0]  # where the timer was aimed (no rounding drift)
        self._vtime = now
        self._settling = True
        while heap and heap[0][0] <= self._vclock:
            c = heappop(heap)[2]
            if c.state == RUNNING:
                self._deliver(c, now)
            else:  # its client left (doomed) or it was abandoned in the waiting room
                self._wasted(now)
            free_slot(now, c)
        self._settling = False
        self._retime()

    def _deliver(self, c, now: float) -> None:
        """Send a served call's response; its slot is freed by the caller."""
        event = c.event
        if self._network is None:
            c.state = SERVING
            trigger_later(self.env, event, DELIVERED)
            return
        delay = self._network()
        if c.deadline is not None and now + delay > c.deadline:
            c.state = DOOMED  # the answer arrives too late; the deadline timer fires
            self._wasted(now)
            return
        c.state = SERVING
        trigger_later(self.env, event, DELIVERED, delay)

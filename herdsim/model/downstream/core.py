"""The capacity-limited downstream: admission and the state of every call in flight.

A caller does ``r = downstream.call(process, timeout)``: the timeout is the caller's (its
client gives up on the call that long after sending it, None: never), and travels with
the call as its ``deadline``. ``r`` is an ``int`` outcome when the call
fails fast (down, waiting room full, rate limited); otherwise a :class:`Call` whose
``event`` the caller yields. The event's value is ``COMPLETED`` or ``TIMEOUT``; either way
the caller then hands it to ``finish(call, value)`` for the final outcome. Calls failed
together at t0 (a ``down`` outage or a crash) are interrupted with cause ``FAILED``.

This core keeps the slots, the waiting room and the client deadlines. Its mechanisms are
parts chosen once, when it is built, from the scenario's ``downstream`` section:

* ``health`` (:mod:`herdsim.model.downstream.health`): outages, crash and restart;
* ``service`` (:mod:`herdsim.model.downstream.service`): ``at_start`` or processor sharing;
* the collapse guard (:mod:`herdsim.model.downstream.collapse`), only with ``overload.collapse``;
* the rate limiter (:mod:`herdsim.policies.rate_limit`), only with ``rate_limit``;
* the network (:mod:`herdsim.model.downstream.network`), only with ``network_delay`` or
  ``request_delay``.

Its defences (disciplines, CoDel, shedding, admission limits) live in the subclass
:class:`herdsim.model.downstream.defences.DefendedDownstream`, built only when a scenario asks.

No process is spawned per call: a completed call costs one scheduled event, a fast failure
none. Client deadlines share one timer: the callers of one downstream give it one timeout
(the workers theirs; a tier whose callers' timeouts differ arms a timer per call, see
:mod:`~herdsim.model.downstream.tiers`), so they fall due in the order they were armed,
and a queue of them with a timer for its head keeps the event heap as small as the calls
in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import simpy

from herdsim.config.sections import Downstream as DownstreamConfig
from herdsim.model.calls import (
    ABANDONED,
    COMPLETED,
    DELIVERED,
    DOOMED,
    DOWN,
    ERROR,
    FAILED,
    OK,
    REJECTED,
    RUNNING,
    SERVING,
    THROTTLED,
    TIMEOUT,
    WAITING,
    Call,
    make_call,
)
from herdsim.model.downstream.collapse import CollapseGuard
from herdsim.model.downstream.degraded import DegradedAtStart
from herdsim.model.downstream.health import Health
from herdsim.model.downstream.network import Wire
from herdsim.model.downstream.service import AtStart, ProcessorSharing
from herdsim.model.kernel import at, later, trigger_later, unfired
from herdsim.model.streams import Draws

SETTLED = (SERVING, ABANDONED)  # a call whose answer is on its way, or whose client left


class Downstream:
    """The service every worker calls. See the module docstring for the protocol."""

    def __init__(self, env: simpy.Environment, cfg: DownstreamConfig, service: Draws,
                 outage_draw: Draws, recorder, network: Draws | None = None,
                 request: Draws | None = None):
        self.env = env
        self.concurrency = cfg.concurrency
        self.queue_limit = cfg.queue_limit
        self.serve_abandoned = cfg.serve_abandoned
        self._outage_draw = outage_draw
        self.busy = 0
        self.n_waiting = 0
        self._waiting: deque[Call] = deque()
        self.active: dict[Call, None] = {}  # insertion-ordered: failing them is reproducible
        self.epoch = 0
        # Retry-After: the value sent with the last throttled or rejected answer.
        self.retry_after: float | None = None
        # Client deadlines still to come, in the order they were armed: every deadline is
        # its arming time + ``timeout``, so this is also their order in time, and one timer
        # (for the head) serves them all. ``on_deadline(call)`` handles each one due.
        self._deadlines: deque[Call] = deque()
        self._deadline_armed = False
        self._on_deadlines_due = self._deadlines_due  # bound once, not once per timer
        self.on_deadline = self.expire  # the network's handler when calls cross one
        # told how many calls in flight fail together at t0, before they do (a tier counts)
        self.on_fail_in_flight: Callable[[int], None] | None = None
        # Recorder lists, bound once.
        self._attempts = recorder.attempts.append
        self._rejected = recorder.rejected.append
        self._timeouts = recorder.timeouts.append
        self._errors = recorder.errors.append
        # The parts.
        collapse = cfg.overload.collapse
        self.health = Health(env, cfg.outages, self._fail_in_flight, recorder.crashes.append,
                             collapse.restart_time if collapse is not None else None)
        self._guard = CollapseGuard(collapse) if collapse is not None else None
        self.limiter = cfg.rate_limit.build() if cfg.rate_limit else None
        self._gated = self.limiter is not None or self._guard is not None  # checked per call
        overload = cfg.overload
        self.service: AtStart | ProcessorSharing  # (DegradedAtStart is an AtStart)
        if overload.latency_model == "continuous":
            self.service = ProcessorSharing(self, service, cfg.service.mean,
                                            overload.latency_per_call, network,
                                            recorder.wasted.append)
        elif cfg.degradation is None:
            self.service = AtStart(self, service, overload.latency_per_call, network,
                                   recorder.wasted.append)
        else:  # a server that slows as it fills: chosen here, the plain path untouched
            self.service = DegradedAtStart(self, service, overload.latency_per_call, network,
                                           recorder.wasted.append, cfg.degradation,
                                           recorder.gauges)
        self._start = self.service.start
        hint = cfg.retry_after
        self._hint: Callable[[float], float] | None = None
        if hint == "limiter":
            assert self.limiter is not None  # the scenario's check: it needs a rate_limit
            self._hint = self.limiter.wait
        elif hint is not None:
            fixed = hint
            self._hint = lambda now: fixed
        # The entry point of the call protocol (no wrapper on the hot path without delay).
        self.call = (self.admit if network is None and request is None
                     else Wire(self, network, request).call)

    # -- the call protocol ---------------------------------------------------------------

    def admit(self, proc, timeout: float | None) -> int | Call:
        """Start a call on behalf of *proc*, whose client gives up after *timeout*: an
        ``int`` outcome or a :class:`Call`."""
        env = self.env
        now = env.now
        self._attempts(now)
        health = self.health
        if not health.up:
            self._rejected(now)
            return DOWN
        if health.blackhole:  # (it needs a timeout: the scenario's check)
            c = make_call(proc, self.epoch, now + timeout)  # type: ignore[operator]
            c.state = SERVING  # its answer (the timeout) is on its way
            c.event = later(env, timeout, TIMEOUT)  # type: ignore[arg-type]
            return c
        if self._gated:
            refused = self._overload(now)
            if refused is not None:
                return refused
        c = make_call(proc, self.epoch, now + timeout if timeout is not None else None)
        if self.busy < self.concurrency:
            self.busy += 1
            self._start(c, now)
        elif self.queue_limit is None or (len(self._waiting) if self.serve_abandoned
                                          else self.n_waiting) < self.queue_limit:
            c.event = unfired()  # (the bound: see in_room, inlined on the hot path)
            self._waiting.append(c)
            self.n_waiting += 1
            if timeout is not None:
                self.arm_deadline(c)
        else:
            return self._refuse(now, REJECTED)
        self.active[c] = None
        return c

    def _overload(self, now: float) -> int | None:
        """The rate limiter's and then the collapse guard's answer to a call arriving now:
        THROTTLED, DOWN (it crashed the downstream), or None to go on."""
        if self.limiter is not None and not self.limiter.take(now):
            return self._refuse(now, THROTTLED)
        if self._guard is not None and self._guard.overloaded(now, self.busy + self.n_waiting):
            self.health.crash(now)
            self._rejected(now)
            return DOWN
        return None

    def _refuse(self, now: float, outcome: int) -> int:
        """Refuse a call at once, with the Retry-After hint when the downstream sends one."""
        self._rejected(now)
        if self._hint is not None:
            self.retry_after = self._hint(now)
        return outcome

    def arrive(self, c: Call) -> int | None:
        """Admit a call sent over the request leg, arriving now (the rules of :meth:`admit`).

        Its event and client deadline timer exist already. Returns the fast failure's
        outcome (the network sends it back), or None. A call whose client gave up while it
        was on the way (``ABANDONED``) still loads the server: counted, served as waste.
        """
        env = self.env
        now = env.now
        self._attempts(now)
        health = self.health
        if not health.up:
            self._rejected(now)
            return DOWN
        abandoned = c.state == ABANDONED
        if health.blackhole:
            if not abandoned:
                c.state = SERVING
                # (a blackhole needs a timeout: the scenario's check)
                trigger_later(env, c.event, TIMEOUT, c.deadline - now)  # type: ignore[operator]
            return None
        if self._gated:
            refused = self._overload(now)
            if refused is not None:
                return refused
        c.epoch = self.epoch
        if not abandoned:
            c.state = WAITING
        if self.busy < self.concurrency:
            self.busy += 1
            self._start(c, now)
        elif self.queue_limit is None or self.in_room() < self.queue_limit:
            self._waiting.append(c)
            self.n_waiting += not abandoned
        else:
            return self._refuse(now, REJECTED)
        if not abandoned:
            self.active[c] = None
        return None

    def finish(self, c: Call, value: int) -> int:
        """The outcome of a call whose event fired with *value*."""
        self.active.pop(c, None)
        c.event = None  # done with: a waited call's deadline entry outlives it
        now = self.env.now
        if value == TIMEOUT:
            self._timeouts(now)
            return TIMEOUT
        if value != COMPLETED and value != DELIVERED:
            self.retry_after = c.retry_after
            return value  # a fast failure that crossed the network
        outcome = OK
        error_rate = self.health.error_rate
        if error_rate and self._outage_draw() < error_rate:
            self._errors(now)
            outcome = ERROR
        if value == COMPLETED:
            if self._waiting:
                self.free_slot(now)
            else:  # nobody waits for the slot
                self.busy -= 1
        return outcome

    # -- for the parts ---------------------------------------------------------------------

    def in_room(self) -> int:
        """Calls that occupy the waiting room: the live ones, and with
        ``serve_abandoned`` those whose client left too (they wait to be served)."""
        return len(self._waiting) if self.serve_abandoned else self.n_waiting

    def free_slot(self, now: float, c: Call | None = None) -> None:
        """A slot's work (*c*'s, when the part knows it) is done: the waiting room's head
        takes it, or it is free."""
        waiting = self._waiting
        while waiting:
            head = waiting.popleft()
            if head.state == WAITING:
                self.n_waiting -= 1
                self._start(head, now)
                return
            if self.serve_abandoned:
                self._start(head, now)
                return
        self.busy -= 1

    def arm_deadline(self, c: Call) -> None:
        """Have ``on_deadline(c)`` called at ``c.deadline`` (now + its caller's timeout)."""
        self._drop_settled()
        self._deadlines.append(c)
        if not self._deadline_armed:
            self._arm_head()

    def _drop_settled(self) -> None:
        """Calls answered (or left) at the head need no deadline any more."""
        deadlines = self._deadlines
        while deadlines and deadlines[0].state in SETTLED:
            deadlines.popleft()

    # Only calls with a deadline are queued (``arm_deadline``): ``deadline`` is a float.

    def _arm_head(self) -> None:
        at(self.env, self._deadlines[0].deadline).callbacks.append(  # type: ignore[arg-type]
            self._on_deadlines_due)
        self._deadline_armed = True

    def _deadlines_due(self, _timer) -> None:
        deadlines, now, on_deadline = self._deadlines, self.env.now, self.on_deadline
        while deadlines and deadlines[0].deadline <= now:  # type: ignore[operator]
            on_deadline(deadlines.popleft())
        self._drop_settled()
        self._deadline_armed = False
        if deadlines:
            self._arm_head()

    def expire(self, c: Call) -> None:
        """The client of a waiting, doomed or processor-shared call gives up now (its
        deadline, or its caller cancelled it): it hears ``TIMEOUT`` once, and the call is
        ``ABANDONED`` (the server works on where it had started), so a second end (the
        deadline after a cancel) does nothing."""
        if c.epoch != self.epoch:
            return
        state = c.state
        if state == WAITING:
            self.n_waiting -= 1
        elif state != DOOMED and state != RUNNING:  # answered, or already given up
            return
        c.state = ABANDONED
        trigger_later(self.env, c.event, TIMEOUT)

    def _fail_in_flight(self) -> None:
        """Every call in service or waiting fails now, together (the herd's t0)."""
        if self.on_fail_in_flight is not None:
            self.on_fail_in_flight(len(self.active))
        self.epoch += 1
        active, self.active = self.active, {}
        for c in active:
            c.proc.interrupt(FAILED)
        self._waiting.clear()
        self.n_waiting = 0
        self.busy = 0
        if self._guard is not None:
            self._guard.clear()
        self.service.reset(self.env.now)

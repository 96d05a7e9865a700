"""A downstream that defends itself: queue disciplines, CoDel, probabilistic shedding and
an admission limit, on top of :class:`~herdsim.model.downstream.Downstream`.

Built only when the scenario's ``downstream`` asks for one of them (``defends()``), so a
plain downstream keeps its lean core. The order a call meets them: down, blackhole (as
in the core), then the **admission limit** (calls admitted, in service plus waiting,
against ``limit_at(now)`` of a limiter from :mod:`herdsim.policies.limiters`), then
**shedding** (from ``above`` waiting calls, a call is admitted with ``probability``), then
the rate limiter and the collapse guard (as in the core: a call refused in front of the
server, like one the rate limiter throttles, does not count towards a crash), then a slot
or the waiting room. Calls over the limit
or shed are refused at once with ``admission.status`` (503: ``REJECTED``, 429:
``THROTTLED``; shedding always 503) and the downstream's Retry-After.

When a slot frees, the **discipline** (:mod:`herdsim.policies.disciplines`) picks the next
call: the oldest or the newest, always or by the room's depth (read once here: a room that
always serves one end asks nothing per call). With **CoDel**, while the room has not been
empty for ``interval``, a call picked after waiting longer than ``target`` is rejected
(503) instead of served (:mod:`herdsim.policies.codel`): the check runs when a slot frees
(CoDel's dequeue), where Facebook's version gives such a call a ``target`` timeout when it
arrives.

The limiter sees every admitted call once as it leaves: served (``sample`` with the
server-side rtt, also for calls whose client left), or dropped (left the room unserved:
its client gave up with ``serve_abandoned: false``, or CoDel rejected it). A limiter that
``sees_client_reset`` (Envoy's, a proxy in front of the server) instead drops a call the
moment its client gives up, whatever the server behind does with it. Calls failed
together at t0 are forgotten without a sample.
"""

from __future__ import annotations

from herdsim.model.calls import (
    ABANDONED,
    COMPLETED,
    REJECTED,
    THROTTLED,
    TIMEOUT,
    WAITING,
    Call,
)
from herdsim.model.downstream.classed import classed as by_class
from herdsim.model.downstream.core import Downstream
from herdsim.model.downstream.degraded import degrading
from herdsim.model.downstream.refusals import costly
from herdsim.model.kernel import trigger_later

GAUGES = ("admission_limit", "lifo")  # the gauges, by mechanism (undefined without it)
NANOSECOND = 1e-9  # System.nanoTime's resolution, the limiters' clock


def downstream_type(cfg, classed: bool = False) -> type[Downstream]:
    """The downstream a ``downstream`` (or service) section *cfg* asks for: with its
    defences when it has any (by criticality class when *classed*: the workers'
    downstream of a run with classes), else the lean core."""
    base: type[Downstream] = DefendedDownstream if cfg.defends() else Downstream
    if cfg.degradation is not None:  # each part only when asked: else the class as it was
        base = degrading(base)
    if cfg.refusal_cost is not None and cfg.refusal_cost.costs():
        base = costly(base)
    if classed and cfg.defends():
        base = by_class(base)
    return base


class DefendedDownstream(Downstream):
    """The downstream with its defences (see the module docstring)."""

    def __init__(self, env, cfg, service, outage_draw, recorder, network=None, request=None,
                 draw=None) -> None:
        super().__init__(env, cfg, service, outage_draw, recorder, network, request)
        self._gated = True  # every call meets the admission limit and shedding first
        room = cfg.room()
        self._always, self._newest = room.always, room.newest  # which end a slot serves
        self.codel = cfg.codel
        self.shedding = cfg.shedding
        self._draw = draw
        self.held = 0  # calls admitted and not yet left (the limiter's in flight)
        self._standing_since = 0.0  # when the waiting room last went from empty to not
        self.gauge_samplers: list = []
        admission = cfg.admission
        self.admission = None
        self._reset_frees = False  # a client giving up ends its call at the limiter
        if admission is not None:
            self.admission = admission.build(draw)
            self._over_limit = THROTTLED if admission.status == 429 else REJECTED
            self._reset_frees = getattr(self.admission, "sees_client_reset", False)
            self._shed_admission = recorder.counter("shed_admission").append
            self.gauge_samplers.append((recorder.gauges.setdefault("admission_limit", []),
                                        lambda: self.admission.limit_at(env.now)))
        if self.shedding is not None:
            self._shed_shedding = recorder.counter("shed_shedding").append
        if self.codel is not None:
            self._shed_codel = recorder.counter("shed_codel").append
        if room.always is None:  # it changes ends with the depth: when it serves the newest
            self.gauge_samplers.append((recorder.gauges.setdefault("lifo", []),
                                        lambda: float(room.newest(self.in_room()))))

    # -- admission -------------------------------------------------------------------------

    def _screen(self, now: float) -> int | None:
        """The admission limit's and then shedding's answer: an outcome, or None."""
        admission = self.admission
        if admission is not None and self.held >= admission.limit_at(now):
            self._shed_admission(now)
            return self._refuse(now, self._over_limit)
        shedding = self.shedding
        if shedding is not None and shedding.sheds(self.in_room(), self._draw):
            self._shed_shedding(now)
            return self._refuse(now, REJECTED)
        return None

    def _overload(self, now: float) -> int | None:
        """The admission limit and shedding, then the core's rate limiter and guard."""
        refused = self._screen(now)
        if refused is not None:
            return refused
        return super()._overload(now)

    def admit(self, proc, timeout: float | None) -> int | Call:
        empty = not self.in_room()
        c = super().admit(proc, timeout)
        if c.__class__ is Call and c in self.active:  # in service or waiting: admitted
            self._admitted(c, self.env.now, empty)
        return c

    def arrive(self, c: Call) -> int | None:
        empty = not self.in_room()
        refused = super().arrive(c)
        # In service or waiting: admitted, but for one whose client left on the way, queued
        # where such calls are skipped (never served).
        if refused is None and not self.health.blackhole and not (
                c.state == ABANDONED and not self.serve_abandoned and self._queued(c)):
            self._admitted(c, self.env.now, empty)
        return refused

    def _queued(self, c: Call) -> bool:
        return bool(self._waiting) and self._waiting[-1] is c

    def _admitted(self, c: Call, now: float, empty: bool) -> None:
        """*c* was just admitted (into a slot or the room, *empty* before it)."""
        self.held += 1
        c.admitted = now
        c.inflight = self.held
        if empty and self._queued(c):
            self._standing_since = now  # the room goes from empty to standing

    # -- leaving -----------------------------------------------------------------------------

    def _left(self, c: Call, now: float, dropped: bool) -> None:
        """An admitted call leaves: the limiter's sample."""
        if c.epoch != self.epoch or not getattr(c, "inflight", 0):
            return
        self.held -= 1
        if self.admission is not None:  # an rtt is never 0 on a real clock (Netflix's
            # limiters refuse one, Gradient2 divides by it): at least a nanosecond
            self.admission.sample(now, min(c.admitted, now - NANOSECOND), c.inflight, dropped)
        # Left once. Its admission time stays: a call whose client's reset left the limiter
        # may still wait to be served (serve_abandoned), and CoDel reads its sojourn.
        c.inflight = 0

    def finish(self, c: Call, value: int) -> int:
        if value == COMPLETED:
            self._left(c, self.env.now, False)
        elif value == TIMEOUT and self._reset_frees:
            self._left(c, self.env.now, True)  # the client's reset reaches the proxy
        return super().finish(c, value)

    def free_slot(self, now: float, c: Call | None = None) -> None:
        """A slot's work is done (*c*'s, when the service part knows it): the call the
        discipline picks takes it, unless CoDel rejects it, or the slot is free."""
        if c is not None:
            self._left(c, now, False)
        waiting = self._waiting
        serve_abandoned = self.serve_abandoned
        always, newest = self._always, self._newest
        while waiting:
            if always is False or (always is None and not newest(self.in_room())):
                nxt = waiting.popleft()
            else:
                nxt = waiting.pop()
            live = nxt.state == WAITING
            if not live and not serve_abandoned:
                continue  # its client left; it already left the limiter
            if live:
                self.n_waiting -= 1
            if self.codel is not None and self._codel_drops(nxt, now, live):
                continue
            self._start(nxt, now)
            return
        self.busy -= 1

    def _codel_drops(self, c: Call, now: float, live: bool) -> bool:
        """CoDel: reject *c* when the room has stood for ``interval`` and *c* has waited
        longer than ``target``."""
        if not self.codel.drops(now - c.admitted, now - self._standing_since):
            return False
        self._shed_codel(now)
        self._left(c, now, True)
        if live:
            c.state = ABANDONED  # its deadline, still armed, now does nothing
            c.retry_after = self._hint(now) if self._hint is not None else None
            self.active.pop(c, None)
            trigger_later(self.env, c.event, REJECTED)
        if not self.in_room():
            self._standing_since = now
        return True

    def expire(self, c: Call) -> None:
        if c.epoch == self.epoch and c.state == WAITING and not self.serve_abandoned:
            self._left(c, self.env.now, True)
        super().expire(c)

    def _fail_in_flight(self) -> None:
        super()._fail_in_flight()
        self.held = 0

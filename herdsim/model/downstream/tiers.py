"""The call graph at run time: tiers (downstreams that call other tiers) and their edges.

Each tier is a core :class:`~herdsim.model.downstream.core.Downstream` (or a
:class:`~herdsim.model.downstream.defences.DefendedDownstream`) with three additions,
made by :class:`Tier`: it counts how every call that reached it ended (succeeded,
or failed: refused at once, an error, a timeout, failed at t0); a service tier arms each
call's client deadline on its own timer (its callers' edges may set different
timeouts); and a tier with ``calls`` serves a call with :class:`Calling` instead of the
``at_start`` part.

Serving a call (thread-per-request): the call holds its slot for the tier's own service
time, then for each edge in order, for its ``count`` parallel calls, each retried by
the edge's policy. The call succeeds when every one of them succeeds; the first that
fails for good (retries spent, or refused by the budget) ends it with ``ERROR`` (a
dependency's failure is the tier's 5xx) and frees its slot, while its siblings go on
to their own end unheard, as a fan-out's futures do. Its client's timeout is the
caller's edge's, sent with the call: when it comes first, the client has its ``TIMEOUT``
and the tier works on (wasted work), unless the edge sets ``cancel``: then the tier stops
serving it, frees the slot and cancels its own calls for it. With ``deadline: propagate`` an edge's
timeout is at most what is left of the call being served, and a call with nothing left
is not sent.

An edge's attempts are the workers' own steps (:mod:`herdsim.policies.attempt`: the
retry with its strategies, presets, Retry-After, the retry bucket and the budget; what
the breaker and the budget hear; a propagated deadline), fed the edge's rules and policy
objects; the breaker is :class:`~herdsim.policies.breaker.CircuitBreaker`. A call from one
tier to the next is a :class:`Branch`: plain callbacks on kernel timers, no process, a
stale token (the call it waits for) instead of a cancellation.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from herdsim.config import graph
from herdsim.config.scenario import Scenario
from herdsim.model import hedging
from herdsim.model.calls import (
    ABANDONED,
    COMPLETED,
    DELIVERED,
    DOOMED,
    ERROR,
    OK,
    RUNNING,
    SERVING,
    WAITING,
)
from herdsim.model.downstream.core import Downstream
from herdsim.model.downstream.defences import DefendedDownstream
from herdsim.model.kernel import at, call_later, trigger_later, urgent
from herdsim.model.streams import draws
from herdsim.policies import budget as budgets
from herdsim.policies.attempt import RetryHooks, RetryRules, call_timeout, heard_step, retry_step
from herdsim.policies.breaker import CircuitBreaker

GRAPH_STREAMS = 1000  # SeedSequence spawn key of the graph's streams (clear of PURPOSES)
TIER_PURPOSES = ("service", "outages", "network", "request", "admission")
EDGE_PURPOSES = ("strategy", "budget")


class TierRecord:
    """What one tier counts: the time of every call that reached it (``attempts``) and of
    every outcome (``succeeded``, ``failed``), its refusals, timeouts, errors, wasted
    work and crashes. The workers' downstream shares the run's recorder for the core's
    counters."""

    def __init__(self, name: str, capacity: float, recorder=None):
        self.name = name
        self.capacity = capacity
        for counter in ("attempts", "rejected", "timeouts", "errors", "wasted", "crashes"):
            setattr(self, counter, getattr(recorder, counter) if recorder is not None
                    else array("d"))
        self.succeeded = array("d")
        self.failed = array("d")
        # a defended tier's own counters and gauges (kept, not written)
        self.optional: dict[str, array] = {}
        self.gauges: dict[str, list[float]] = {}

    def counter(self, name: str) -> array:
        return self.optional.setdefault(name, array("d"))


class Tier(Downstream):
    """A tier: the core downstream with per-tier outcomes and, for service tiers, own
    deadline timers (see the module docstring). :meth:`count` is called once, after
    ``__init__``."""

    record: TierRecord
    own_deadlines: bool

    def count(self, record: TierRecord, own_deadlines: bool) -> None:
        """Count outcomes into *record*; with *own_deadlines*, a timer per deadline."""
        self.record = record
        self.own_deadlines = own_deadlines
        ok, failed, env = record.succeeded.append, record.failed.append, self.env
        inner = self.call

        def call(proc, timeout) -> Any:
            c = inner(proc, timeout)
            if c.__class__ is int:
                failed(env.now)
            return c

        self.call = call  # type: ignore[method-assign]  # the core sets it per instance too
        if own_deadlines:
            self.arm_deadline = self._arm_own  # type: ignore[method-assign]
        self._ok_out, self._failed_out = ok, failed
        self._on_own_deadline = self._own_deadline

    def finish(self, c, value: int) -> int:
        outcome = super().finish(c, value)
        (self._ok_out if outcome == OK else self._failed_out)(self.env.now)
        return outcome

    def _fail_in_flight(self) -> None:
        now, failed = self.env.now, self._failed_out
        for _ in range(len(self.active)):
            failed(now)
        super()._fail_in_flight()

    def _arm_own(self, c) -> None:
        """``arm_deadline`` of a service tier whose callers' timeouts differ: a timer per
        deadline."""
        timer = at(self.env, c.deadline)
        timer.call = c
        timer.callbacks.append(self._on_own_deadline)

    def expire(self, c) -> None:
        """The client deadline of *c* has come (see the core); when its caller's edge
        cancels, a call this tier is serving with calls of its own stops here."""
        running = c.state == RUNNING
        super().expire(c)
        if running and getattr(c.proc, "cancels", False) and c.epoch == self.epoch:
            serving = getattr(self.service, "servings", {}).pop(c, None)
            if serving is not None:
                serving.cancel()

    def cancel(self, c) -> None:
        """*c*'s caller gave up on it (its own call was cancelled): a waiting call is
        dropped and a call served with calls stops, both answered ``TIMEOUT`` as their
        deadline would; a call in a leaf's service runs to its end."""
        if c.state == WAITING or c.state == RUNNING:
            self.expire(c)

    def _own_deadline(self, timer) -> None:
        c = timer.call
        if c.event is not None:  # still awaited
            self.on_deadline(c)


class DefendedTier(Tier, DefendedDownstream):
    """A tier that defends itself."""


class Calling:
    """A tier's service when it calls other tiers: its own work, then its calls (see the
    module docstring). Replaces the ``at_start`` part."""

    def __init__(self, tier, draw, latency_per_call: float, network, edges: list[Edge]):
        self.env = tier.env
        self.tier = tier
        self._health = tier.health
        self._draw = draw
        self._per_call = latency_per_call
        self._network = network
        self.edges = edges
        self._wasted = tier.record.wasted.append
        self._errors = tier.record.errors.append
        self.servings: dict = {}  # call -> its Serving, while it is served

    def start(self, c, now: float) -> None:
        """Put *c* in service now: its own work first."""
        s = self._draw() * self._health.slow
        if self._per_call:
            s += self._per_call * self.tier.busy
        if c.state != ABANDONED:
            c.state = RUNNING
            if c.event is None:  # the call is its own event (no waiter yet)
                c.event = c
                c.callbacks = []
                if c.deadline is not None:
                    self.tier.arm_deadline(c)
            # else: it waited, and its deadline is armed
        serving = self.servings[c] = Serving(self, c)
        call_later(self.env, s, serving.next)

    def reset(self, now: float) -> None:
        """Every call in service has failed: their servings see the new epoch."""
        self.servings.clear()

    def answer(self, serving: Serving, outcome: int) -> None:
        """*serving*'s calls are done: answer its client, or count the work wasted."""
        serving.done = True
        serving.branches = []  # no cycle left for the collector: branches -> serving only
        c, tier, now = serving.call, self.tier, self.env.now
        self.servings.pop(c, None)
        if c.state != RUNNING:  # its client left (timed out) or it was served after
            self._wasted(now)
            tier.free_slot(now, c)
            return
        if outcome == OK and self._network is None:
            c.state = SERVING
            trigger_later(self.env, c.event, COMPLETED)  # the client's finish frees the slot
            return
        tier.free_slot(now, c)
        delay = self._network() if self._network is not None else 0.0
        if c.deadline is not None and now + delay > c.deadline:
            c.state = DOOMED  # the answer would come too late: the deadline fires first
            self._wasted(now)
            return
        c.state = SERVING
        if outcome != OK:
            self._errors(now)
            c.retry_after = None
        trigger_later(self.env, c.event, DELIVERED if outcome == OK else outcome, delay)


class Serving:
    """One call a tier serves, going through its edges in order. ``done`` once it is
    answered; ``gone()`` once the tier failed its calls in flight (its work ends)."""

    __slots__ = ("part", "call", "epoch", "index", "pending", "done", "branches")

    def __init__(self, part: Calling, c):
        self.part = part
        self.call = c
        self.epoch = c.epoch
        self.index = 0
        self.pending = 0
        self.done = False
        self.branches: list[Branch] = []

    def cancel(self) -> None:
        """Its caller gave up (``cancel``): free the slot, stop its calls."""
        if self.done or self.gone():
            return
        self.done = True
        self.part.tier.free_slot(self.part.env.now, self.call)
        branches, self.branches = self.branches, []
        for branch in branches:
            branch.cancel()

    def gone(self) -> bool:
        """The tier failed its calls in flight since this one started (t0)."""
        if self.epoch != self.part.tier.epoch:
            self.branches = []
            return True
        return False

    def next(self, _event=None) -> None:
        """Own work or the previous edge done: the next edge's calls, or the answer."""
        if self.done or self.gone():
            return
        edges = self.part.edges
        if self.index == len(edges):
            self.part.answer(self, OK)
            return
        edge = edges[self.index]
        self.index += 1
        self.pending = count = edge.count
        if count == 1:
            branch = Branch(edge, self)
            self.branches = [branch]
            branch.send()
            return
        self.branches = [Branch(edge, self) for _ in range(count)]
        for branch in self.branches:
            branch.send()

    def branch_done(self, ok: bool) -> None:
        """One call of the current edge succeeded, or failed for good. The first failure
        answers at once; the other calls of the edge go on to their own end (as the
        futures of a fan-out do when the handler returns), unanswered."""
        if self.done or self.gone():
            return
        if not ok:
            self.part.answer(self, ERROR)
            return
        self.pending -= 1
        if not self.pending:
            self.next()


class Edge:
    """One edge at run time: its callee, timeout, count and policy objects."""

    def __init__(self, cfg: graph.Edge, callee, seed: np.random.SeedSequence,
                 deadline: str | None = None):
        self.callee = callee
        self.propagate = (cfg.deadline or deadline) == "propagate"
        self.hedging = hedging.Policy(cfg.hedging) if cfg.hedging is not None else None
        self.cancel = cfg.cancel
        self.call, self.finish = callee.call, callee.finish
        self.env = callee.env
        self.timeout = cfg.timeout
        self.count = cfg.count
        rngs = {name: np.random.default_rng(s)
                for name, s in zip(EDGE_PURPOSES, seed.spawn(len(EDGE_PURPOSES)), strict=True)}
        self.budget = (budgets.build(cfg.budget, draws(lambda n: rngs["budget"].random(n)))
                       if cfg.budget is not None else None)
        self.breaker = CircuitBreaker(cfg.breaker) if cfg.breaker.enabled else None
        # what the workers' retry step records, kept per edge: when each retry was
        # decided and when the budget refused one
        self.retries = array("d")
        self.budget_refused = array("d")
        self.sent = 0  # attempts that left (the callee counts them on its side)
        self.succeeded = 0
        self.failed = 0
        rules = RetryRules.of(cfg.retry, rngs["strategy"])
        self.base = rules.base
        self.heard = heard_step(cfg.breaker.slow_call_threshold, rules.throttling)
        self.retry = retry_step(rules, RetryHooks(_give_up, self._record_sleep,
                                                  self.budget_refused.append, callee))

    def _record_sleep(self, now: float, _job: int, _attempt: int, _sleep: float) -> None:
        self.retries.append(now)


def _give_up(branch: Branch, _now: float) -> None:
    branch.serving.branch_done(False)


class Branch:
    """One of an edge's ``count`` calls, retried by the edge's policy until it succeeds
    or gives up. It stands in for the process the callee's protocol expects (``interrupt``)
    and for the job the attempt's steps expect
    (:class:`~herdsim.policies.attempt.Attempted`)."""

    __slots__ = ("edge", "serving", "retries", "prev", "paid", "waiting", "sent",
                 "cancelled", "hedge")
    poison = False
    id = 0

    def __init__(self, edge: Edge, serving: Serving):
        self.edge = edge
        self.serving = serving
        self.retries = 0
        self.prev = edge.base
        self.paid = 0.0
        self.waiting = None  # the call in flight (a stale answer is not this one's)
        self.sent = 0.0
        self.cancelled = False
        self.hedge: hedging.Hedge | None = None

    @property
    def cancels(self) -> bool:
        """Whether the callee stops a call of this branch its caller gave up on."""
        return self.edge.cancel

    def cancel(self) -> None:
        """The call it serves was cancelled: no more attempts, and the one in flight is
        cancelled too when the edge says so (its answer, if any, is not heeded)."""
        self.cancelled = True
        c = self.waiting
        if c is not None and self.edge.cancel:
            self.edge.callee.cancel(c)
        if self.hedge is not None and self.edge.cancel:
            self.hedge.cancel()

    def send(self, _event=None) -> None:
        """Make an attempt now (unless the call it serves has ended)."""
        if self.cancelled or self.serving.gone():
            return
        edge = self.edge
        now = self.sent = edge.env.now
        timeout = edge.timeout
        if edge.propagate:  # at most the caller's remaining time; none left: not sent
            timeout = call_timeout(timeout, self.serving.call.deadline, now)
            if timeout is False:
                self.serving.branch_done(False)
                return
        budget = edge.budget
        if budget is not None and budget.gates_calls and not budget.allow_call(
                now, not self.retries):  # a budget that counts first tries (as the workers')
            edge.budget_refused.append(now)
            self.serving.branch_done(False)
            return
        breaker = edge.breaker
        if breaker is not None and not breaker.permit(now):
            self.answer(None, counted=False)
            return
        if edge.hedging is not None:
            self.hedge = hedging.Hedge(edge.hedging, edge.callee, self._timeout,
                                       self._copy_counted, self._hedged, edge.cancel)
            self.hedge.start()
            return
        edge.sent += 1
        c = edge.call(self, timeout)
        if c.__class__ is int:
            self.answer(c)
            return
        self.waiting = c
        c.event.callbacks.append(self.heard)

    def _timeout(self):
        """A hedged copy's timeout: the edge's, or what is left of the caller's
        deadline (``False``: nothing is left)."""
        edge = self.edge
        timeout = edge.timeout
        if edge.propagate:
            timeout = call_timeout(timeout, self.serving.call.deadline, edge.env.now)
            if timeout is False:
                return False
        edge.sent += 1
        return timeout

    def _copy_counted(self, outcome: int) -> None:
        if outcome == OK:
            self.edge.succeeded += 1
        else:
            self.edge.failed += 1

    def _hedged(self, outcome: int, _copies: int) -> None:
        """A hedged call's answer (the breaker sees it whole): it is not retried."""
        self.hedge = None  # (a cycle less: the hedge holds this branch's methods)
        edge = self.edge
        edge.heard(self, self.sent, edge.env.now, outcome, outcome != OK, edge.breaker, None,
                   None)
        if not self.cancelled:
            self.serving.branch_done(outcome == OK)

    def heard(self, event) -> None:
        c = self.waiting
        if c is None or c.event is not event:
            return  # an answer to a call the callee failed at t0
        self.waiting = None
        self.answer(self.edge.finish(c, event.value))

    def interrupt(self, cause) -> None:
        """The callee failed its calls in flight (t0): the answer is *cause*, at once."""
        self.waiting = None
        urgent(self.edge.env, cause).callbacks.append(self._interrupted)

    def _interrupted(self, timer) -> None:
        self.answer(timer.value)

    def answer(self, outcome, counted: bool = True) -> None:
        """The attempt's outcome (None: short-circuited): done, or retry, or give up."""
        edge = self.edge
        now = edge.env.now
        failed = outcome != OK
        if counted:
            if failed:
                edge.failed += 1
            else:
                edge.succeeded += 1
            edge.heard(self, self.sent, now, outcome, failed, edge.breaker, None, edge.budget)
        if self.cancelled:
            return
        if not failed:
            self.serving.branch_done(True)
            return
        if edge.hedging is not None:  # short-circuited: a hedged call is not retried
            self.serving.branch_done(False)
            return
        if self.serving.gone():
            return
        pause = edge.retry(self, now, outcome, edge.budget)
        if pause is not None:
            call_later(edge.env, pause, self.send)


def _uniform_deadlines(name: str, every: dict, deadline: str | None) -> bool:
    """Whether every call to tier *name* gets the same timeout (one edge timeout, none
    propagated): its deadlines then fall due in the order they are armed, and the core's
    one timer for the oldest serves them all."""
    incoming = [e for cfg in every.values() for e in cfg.calls if e.service == name]
    return (len({e.timeout for e in incoming}) <= 1
            and not any((e.deadline or deadline) == "propagate" for e in incoming))


def _uniform(rng: np.random.Generator):
    return draws(lambda n: rng.random(n))


def build(env, scenario: Scenario, recorder, top_args: dict, service_draws):
    """Every tier of *scenario*'s graph: ``(the workers' downstream, records by name,
    edges by caller)``. *top_args* are the workers' downstream's draws as a single-tier
    run makes them (its streams are the run's own); ``service_draws(section, rng)`` makes
    a service-time section's draws."""
    every = graph.tiers(scenario.downstream, scenario.services)
    root = np.random.SeedSequence(scenario.seed, spawn_key=(GRAPH_STREAMS,))
    seeds = root.spawn(2 * len(every))
    built: dict = {}
    records: dict[str, TierRecord] = {}
    for i, (name, cfg) in enumerate(every.items()):
        record = TierRecord(name, cfg.capacity_rate(), recorder if i == 0 else None)
        cls = DefendedTier if cfg.defends() else Tier
        if i == 0:
            args = dict(top_args)
        else:
            rngs = {p: np.random.default_rng(s) for p, s in
                    zip(TIER_PURPOSES, seeds[2 * i].spawn(len(TIER_PURPOSES)), strict=True)}
            args = {"service": service_draws(cfg.service, rngs["service"]),
                    "outage_draw": _uniform(rngs["outages"]),
                    "network": (service_draws(cfg.network_delay, rngs["network"])
                                if cfg.network_delay else None),
                    "request": (service_draws(cfg.request_delay, rngs["request"])
                                if cfg.request_delay else None)}
            if cfg.defends():
                args["draw"] = _uniform(rngs["admission"])
        tier = cls(env, cfg, recorder=record, **args)
        tier.count(record, own_deadlines=i > 0 and not _uniform_deadlines(name, every,
                                                                       scenario.deadline))
        built[name] = tier
        records[name] = record
    edges: dict = {}
    for i, (name, cfg) in enumerate(every.items()):
        if not cfg.calls:
            continue
        tier = built[name]
        mine = [Edge(e, built[e.service], s, scenario.deadline) for e, s in
                zip(cfg.calls, seeds[2 * i + 1].spawn(len(cfg.calls)), strict=True)]
        edges[name] = mine
        tier.service = Calling(tier, tier.service._draw, cfg.overload.latency_per_call,
                               tier.service._network, mine)
        tier._start = tier.service.start
    return built[graph.top_name(scenario.downstream)], records, edges

"""A call graph's edges at run time: an :class:`Edge` (its callee, timeout, count and
policy objects) and a :class:`Branch`, one of its calls, retried until it succeeds or
gives up.

An edge's attempts are the workers' own steps (:mod:`herdsim.policies.attempt`: the
retry with its strategies, presets, Retry-After, the retry bucket and the budget; what
the breaker and the budget hear; a propagated deadline), fed the edge's rules and policy
objects; the breaker is :class:`~herdsim.policies.breaker.CircuitBreaker`. A branch is
plain callbacks on kernel timers, no process, a stale token (the call it waits for)
instead of a cancellation. Its timeout is the edge's, sent with each call; with
``deadline: propagate`` at most what is left of the call being served, and a call with
nothing left is not sent.
"""

from __future__ import annotations

from array import array
from typing import Any, Protocol

import numpy as np

from herdsim.config import graph
from herdsim.model import hedging
from herdsim.model.calls import OK
from herdsim.model.kernel import call_later, urgent
from herdsim.model.streams import uniform
from herdsim.policies.attempt import RetryHooks, RetryRules, call_timeout, heard_step, retry_step

EDGE_PURPOSES = ("strategy", "budget")


class Served(Protocol):
    """What a branch needs of the call it serves (a
    :class:`~herdsim.model.downstream.calling.Serving`)."""

    call: Any  # the call being served (its ``deadline``)

    def gone(self) -> bool:
        """The tier failed its calls in flight since the call started (t0)."""

    def branch_done(self, ok: bool) -> None:
        """One of its calls succeeded, or failed for good."""


class Edge:
    """One edge at run time: its callee, timeout, count and policy objects."""

    def __init__(self, cfg: graph.Edge, callee, seed: np.random.SeedSequence,
                 deadline: str | None = None):
        self.callee = callee
        self.service = cfg.service  # the callee's name
        self.propagate = (cfg.deadline or deadline) == "propagate"
        self.hedging = hedging.Policy(cfg.hedging) if cfg.hedging is not None else None
        self.cancel = cfg.cancel
        self.call, self.finish = callee.call, callee.finish
        self.env = callee.env
        self.timeout = cfg.timeout
        self.count = cfg.count
        rngs = {name: np.random.default_rng(s)
                for name, s in zip(EDGE_PURPOSES, seed.spawn(len(EDGE_PURPOSES)), strict=True)}
        self.budget = (cfg.budget.build(uniform(rngs["budget"]))
                       if cfg.budget is not None else None)
        self.breaker = cfg.breaker.build() if cfg.breaker.enabled else None
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

    def __init__(self, edge: Edge, serving: Served):
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

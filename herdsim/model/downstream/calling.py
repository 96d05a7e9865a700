"""A tier's service when it calls other tiers (thread-per-request).

A call holds its slot for the tier's own service time, then for each edge in order, for
its ``count`` parallel calls (:class:`~herdsim.model.downstream.edges.Branch`), each
retried by the edge's policy. The call succeeds when every one of them succeeds; the
first that fails for good (retries spent, or refused by the budget) ends it with
``ERROR`` (a dependency's failure is the tier's 5xx) and frees its slot, while its
siblings go on to their own end unheard, as a fan-out's futures do. When its client's
deadline comes first, the client has its ``TIMEOUT`` and the tier works on (wasted
work), unless the caller's edge sets ``cancel``: then :meth:`Serving.cancel` frees the
slot and cancels the tier's own calls for it.
"""

from __future__ import annotations

from herdsim.model.calls import (
    ABANDONED,
    COMPLETED,
    DELIVERED,
    DOOMED,
    ERROR,
    OK,
    RUNNING,
    SERVING,
)
from herdsim.model.downstream.edges import Branch, Edge
from herdsim.model.kernel import call_later, trigger_later


class Calling:
    """A tier's service when it calls other tiers: its own work, then its calls (see the
    module docstring). Replaces the ``at_start`` part of *tier* (a downstream), counting
    into its *record*."""

    def __init__(self, tier, record, draw, latency_per_call: float, network,
                 edges: list[Edge]):
        self.env = tier.env
        self.tier = tier
        self._health = tier.health
        self._draw = draw
        self._per_call = latency_per_call
        self._network = network
        self.edges = edges
        self._wasted = record.wasted.append
        self._errors = record.errors.append
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

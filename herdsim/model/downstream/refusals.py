"""Refusals that cost server time (``downstream.refusal_cost``,
:mod:`herdsim.policies.refusal_cost`): a subclass of the downstream's class made by
:func:`costly` (one base: no class has two) when some refusal costs anything, so a
downstream whose refusals are free keeps its class and pays nothing.

A refusal's work takes a slot for its cost: a free slot at once (busy + 1, freed by a
timer), or, every slot busy, it is owed and the next slot to free pays it before taking a
waiting call (one timer for all that is owed). Work from before a crash is forgotten with
the calls (the epoch). Which refusal it is comes from where it is counted: the admission
limit's and shedding's counters mark the refusal that follows, CoDel's drop is charged
where it is counted, the rest by its outcome (``REJECTED``: the door, ``THROTTLED``: the
rate limiter); a call that expires waiting (``serve_abandoned: false``) is charged when
its client gives up.
"""

from __future__ import annotations

from functools import cache
from typing import TypeVar, cast

from herdsim.model.calls import REJECTED, THROTTLED, WAITING, Call
from herdsim.model.kernel import later

BY_OUTCOME = {REJECTED: "rejected", THROTTLED: "rate_limited"}
MARKED = {"_shed_admission": "admission", "_shed_shedding": "shed"}  # counter -> cost

T = TypeVar("T")


@cache  # one class per base, made once
def _made(base: type) -> type:
    """The class of a downstream whose refusals take a slot's time, with *base* its one
    base (made by a function, so that no downstream class has two)."""

    class CostlyRefusals(base):  # type: ignore[valid-type,misc]
        """A downstream whose refusals take a slot's time (see the module doc)."""

        def __init__(self, env, cfg, *args, **kwargs) -> None:
            super().__init__(env, cfg, *args, **kwargs)  # type: ignore[call-arg]
            cost = cfg.refusal_cost
            self._cost = {name: getattr(cost, name) for name in
                          ("rejected", "shed", "rate_limited", "admission", "expired")}
            self._owed = 0.0
            self._marked: str | None = None
            self._on_held = self._held  # bound once
            self._costly = kwargs["recorder"].counter("costly_refusals").append
            self._leaves = getattr(self, "_left", None)  # a defended server's limiter sample
            for counter, name in MARKED.items():
                count = getattr(self, counter, None)
                if count is not None:
                    setattr(self, counter, self._marking(count, name))
            codel = getattr(self, "_shed_codel", None)
            if codel is not None:
                self._shed_codel = self._charging(codel, "shed")

        def _marking(self, count, name: str):
            def counted(now: float) -> None:
                count(now)
                self._marked = name
            return counted

        def _charging(self, count, name: str):
            def counted(now: float) -> None:
                count(now)
                self.charge(now, self._cost[name])
            return counted

        # -- the work ----------------------------------------------------------------------------

        def charge(self, now: float, cost: float) -> None:
            """*cost* seconds of a slot: a free one now, else owed to the next to free."""
            if cost <= 0.0:
                return
            self._costly(now)
            if self.busy < self.concurrency:
                self.busy += 1
                self._hold(cost)
            else:
                self._owed += cost

        def _hold(self, cost: float) -> None:
            timer = later(self.env, cost)
            timer.callbacks.append(self._on_held)
            timer.call = self.epoch  # (a timer's one slot: whose work it is, by epoch)

        def _held(self, timer) -> None:
            if timer.call == self.epoch:
                self.free_slot(self.env.now)

        # -- the downstream's hooks ----------------------------------------------------------------

        def _refuse(self, now: float, outcome: int) -> int:
            name = self._marked or BY_OUTCOME[outcome]
            self._marked = None
            self.charge(now, self._cost[name])
            return super()._refuse(now, outcome)  # type: ignore[misc]

        def free_slot(self, now: float, c: Call | None = None) -> None:
            if self._owed > 0.0:  # the slot pays what is owed before anyone waiting
                if c is not None and self._leaves is not None:
                    self._leaves(c, now, False)
                owed, self._owed = self._owed, 0.0
                self._hold(owed)
                return
            super().free_slot(now, c)  # type: ignore[misc]

        def finish(self, c: Call, value: int) -> int:
            outcome = super().finish(c, value)  # type: ignore[misc]
            if self._owed > 0.0 and self.busy < self.concurrency:  # a slot freed, nobody waited
                owed, self._owed = self._owed, 0.0
                self.busy += 1
                self._hold(owed)
            return outcome

        def expire(self, c: Call) -> None:
            if c.epoch == self.epoch and c.state == WAITING and not self.serve_abandoned:
                self.charge(self.env.now, self._cost["expired"])
            super().expire(c)  # type: ignore[misc]

        def _fail_in_flight(self) -> None:
            super()._fail_in_flight()  # type: ignore[misc]
            self._owed = 0.0

    CostlyRefusals.__name__ = CostlyRefusals.__qualname__ = f"Costly{base.__name__}"
    return CostlyRefusals


def costly(base: type[T]) -> type[T]:
    """*base* (a downstream class) whose refusals cost server time."""
    return cast("type[T]", _made(cast("type", base)))

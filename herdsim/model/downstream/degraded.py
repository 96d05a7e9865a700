"""A server that slows as it fills: :class:`DegradedAtStart`, the ``at_start`` service part
with a ``downstream.degradation`` member (:mod:`herdsim.policies.degradation`).

Chosen once, when the downstream is built, so a downstream without degradation keeps
:class:`~herdsim.model.downstream.service.AtStart` and its class, and pays nothing. At
every service start the member's lag is advanced to now, and the service time is drawn ×
slow × the factor at that level. The driver is the server's state (calls in service and
waiting), set again after every change of it: a subclass of the downstream's class, made
by :func:`degrading` (one base: no class has two), settles it after each admission, end
of service and expiry, so the lag sees the state as a step function, exactly. The
gauge ``degradation`` is the factor at each bin start. A crash clears the level (a
restarted process starts with an empty heap and no lock queue).
"""

from __future__ import annotations

from functools import cache
from typing import TypeVar, cast

from herdsim.model.downstream.service import AtStart
from herdsim.policies.degradation import Degradation

T = TypeVar("T")


class DegradedAtStart(AtStart):
    """``at_start`` service whose time is multiplied by the degradation factor."""

    def __init__(self, downstream, draw, latency_per_call: float, network, wasted,
                 degradation: Degradation, gauges: dict[str, list[float]]):
        super().__init__(downstream, draw, latency_per_call, network, wasted)
        self._member = degradation
        self._lag = degradation.lag(downstream.env.now)
        self._plain_draw = draw
        self._draw = self._degraded_draw  # the base class draws through this
        # the downstream's: its subclass settles the driver, the sampler reads the factor
        # (a tier that calls others replaces this part, and keeps its degraded draw)
        downstream.degradation = self
        downstream.degradation_samplers = [(gauges.setdefault("degradation", []),
                                            self.factor_now)]

    def _degraded_draw(self) -> float:
        """A service draw × the factor now."""
        return self._plain_draw() * self.factor_now()

    def factor_now(self) -> float:
        """The factor at the level now."""
        return self._member.factor(self._lag.at(self.env.now))

    def settle(self) -> None:
        """The server's state may have changed: the driver from now on (the waiting calls
        are those in the room: with ``serve_abandoned``, those whose client left too)."""
        ds = self._ds
        self._lag.set(self.env.now, self._member.driver(ds.busy, ds.in_room()))

    def restart(self, now: float) -> None:
        """Every call in service failed (a crash): the restarted server starts clean."""
        self._lag.reset(now, self._member.driver(0, 0))


@cache  # one class per base, made once
def _made(base: type) -> type:
    """The class of a downstream whose driver is settled after every change, with *base* its one
    base (made by a function, so that no downstream class has two)."""

    class DegradingServer(base):  # type: ignore[valid-type,misc]
        """After every change of the server's state, the driver is set again."""

        def admit(self, proc, timeout):
            c = super().admit(proc, timeout)  # type: ignore[misc]
            self.degradation.settle()
            return c

        def arrive(self, c):
            refused = super().arrive(c)  # type: ignore[misc]
            self.degradation.settle()
            return refused

        def finish(self, c, value: int) -> int:
            outcome = super().finish(c, value)  # type: ignore[misc]
            self.degradation.settle()
            return outcome

        def free_slot(self, now: float, c=None) -> None:
            super().free_slot(now, c)  # type: ignore[misc]
            self.degradation.settle()

        def expire(self, c) -> None:
            super().expire(c)  # type: ignore[misc]
            self.degradation.settle()

        def _fail_in_flight(self) -> None:
            super()._fail_in_flight()  # type: ignore[misc]
            self.degradation.restart(self.env.now)

    DegradingServer.__name__ = DegradingServer.__qualname__ = f"Degrading{base.__name__}"
    return DegradingServer


def degrading(base: type[T]) -> type[T]:
    """*base* (a downstream class) whose service slows with its state."""
    return cast("type[T]", _made(cast("type", base)))

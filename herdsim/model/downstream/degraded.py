"""A server that slows as it fills: :class:`DegradedAtStart`, the ``at_start`` service part
with a ``downstream.degradation`` member (:mod:`herdsim.policies.degradation`).

Chosen once, when the downstream is built, so a downstream without degradation keeps
:class:`~herdsim.model.downstream.service.AtStart` and pays nothing. At every service
start the member's lag is advanced to now (its driver held since the last start), the
service time is drawn × slow × the factor at that level, and the driver is set from the
server's state (calls in service, with the one starting, and waiting). The gauge sampler
(``degradation``, the factor at each bin start) sets the driver too, so an idle server's
level decays from the state it was last seen in. A crash clears the level (a restarted
process starts with an empty heap and no lock queue).
"""

from __future__ import annotations

from herdsim.model.downstream.service import AtStart
from herdsim.policies.degradation import Degradation


class DegradedAtStart(AtStart):
    """``at_start`` service whose time is multiplied by the degradation factor."""

    def __init__(self, downstream, draw, latency_per_call: float, network, wasted,
                 degradation: Degradation, gauges: dict[str, list[float]]):
        super().__init__(downstream, draw, latency_per_call, network, wasted)
        self._member = degradation
        self._lag = degradation.lag(downstream.env.now)
        self._plain_draw = draw
        self._draw = self._degraded_draw  # the base class draws through this
        self.gauge_samplers = [(gauges.setdefault("degradation", []), self.factor_now)]

    def _degraded_draw(self) -> float:
        """A service draw × the factor now; the driver set from the state after it."""
        ds = self._ds
        now = self.env.now
        lag = self._lag
        factor = self._member.factor(lag.at(now))
        lag.set(now, self._member.driver(ds.busy, ds.n_waiting))
        return self._plain_draw() * factor

    def factor_now(self) -> float:
        """The factor now, the driver set from the server's state as it is."""
        ds = self._ds
        now = self.env.now
        factor = self._member.factor(self._lag.at(now))
        self._lag.set(now, self._member.driver(ds.busy, ds.n_waiting))
        return factor

    def reset(self, now: float) -> None:
        """Every call in service failed (a crash): the restarted server starts clean."""
        self._lag.reset(now, self._member.driver(0, 0))

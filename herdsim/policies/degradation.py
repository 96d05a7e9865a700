"""Capacity that degrades under load (``downstream.degradation``): a server whose service
time grows with its own state, and recovers from it only with a lag.

Each member reads a **level** off the server (:meth:`Degradation.driver`: calls in
service and calls waiting), and turns the level into a **factor** on every service time
(:meth:`Degradation.factor`, capped at ``max_factor``). Between the two sits a
first-order lag (:class:`Lag`, time constant ``recovery``): the level the factor reads
follows the driver as ``dL/dt = (driver - L) / recovery``, so a step of the driver from 0
to x gives ``L(t) = x (1 - exp(-t / recovery))`` and the slowdown outlasts the load that
caused it. Members:

* ``gc``: a garbage-collected heap. Every call in the server (waiting or in service) holds
  ``memory_per_call`` of live memory beside the ``baseline``; a collector's work per byte
  allocated grows as live / (heap - live) (a tracing collector copies or marks the live
  data once per heap's worth of allocation), so the factor is
  ``1 + cost × L / (heap - L)``, ``max_factor`` once the heap is full. The lag is the old
  generation, collected rarely: memory drains after the load falls.
* ``contention``: a lock (or a cache line, a connection pool) shared by the calls: every
  call beyond ``free`` adds ``per_call`` to the factor, counting the calls ``of`` says
  (in service, waiting, or both); the lag is the convoy's: a lock's queue clears only as
  fast as its holders finish.

Pure Python; the engine (:mod:`herdsim.model.downstream.degraded`) asks it at every
service start.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import FieldError, PositiveDuration

MAX_FACTOR = 1_000.0  # no server is modelled slower than this many times its service time


class Lag:
    """A first-order lag: the level follows the driver held since the last :meth:`set`
    with time constant *tau* (seconds)."""

    def __init__(self, tau: float, level: float = 0.0, now: float = 0.0) -> None:
        self.tau = tau
        self.level = level
        self.driver = level
        self.time = now

    def at(self, now: float) -> float:
        """The level at *now* (not before the last update), the driver held since."""
        dt = now - self.time
        if dt > 0.0:
            self.level = self.driver + (self.level - self.driver) * math.exp(-dt / self.tau)
            self.time = now
        return self.level

    def set(self, now: float, driver: float) -> None:
        """From *now* on the driver is *driver*."""
        self.at(now)
        self.driver = driver

    def reset(self, now: float, level: float) -> None:
        """Level and driver are *level* from *now* (a restart clears the state)."""
        self.level = self.driver = level
        self.time = now


class Degradation(Member):
    """The fields every member has: the lag and the cap."""

    recovery: PositiveDuration = Field(
        description="time constant of the lag with which the degradation follows its "
                    "driver (and persists after the load falls)")
    max_factor: float = Field(10.0, ge=1, le=MAX_FACTOR,
                              description="the largest factor on the service time")
    fast_path: ClassVar[bool] = True  # the server's part: the workers' loops are untouched

    def driver(self, busy: int, waiting: int) -> float:
        """The level the state drives towards: *busy* calls in service, *waiting* calls
        waiting."""
        raise NotImplementedError

    def factor(self, level: float) -> float:
        """The factor on every service time at *level*, in ``[1, max_factor]``."""
        raise NotImplementedError

    def lag(self, now: float = 0.0) -> Lag:
        """The lag, at rest (an empty server) at *now*."""
        rest = self.driver(0, 0)
        return Lag(self.recovery, rest, now)


class Gc(Degradation):
    """``kind: gc``: service time grows with the live memory the calls in the server hold."""

    kind: Literal["gc"]
    memory_per_call: float = Field(gt=0, le=1e6, description="MB held by each call in the "
                                                             "server, waiting or in service")
    heap: float = Field(gt=0, le=1e9, description="MB of heap")
    baseline: float = Field(0.0, ge=0, description="MB live with no call in the server")
    cost: float = Field(1.0, ge=0, le=MAX_FACTOR,
                        description="service time added, as a fraction of itself, when "
                                    "live memory equals free memory")
    about: ClassVar[str] = "service × (1 + cost × live / (heap − live)), live memory = " \
                           "baseline + memory_per_call × calls in the server, lagged"
    fluid: ClassVar[str | None] = "μ / min(max_factor, 1 + cost·M/(heap − M)), " \
                                  "dM/dt = (baseline + memory_per_call·N − M) / recovery"

    @model_validator(mode="after")
    def _baseline_fits(self) -> Gc:
        if self.baseline >= self.heap:
            raise FieldError("baseline", f"baseline ({self.baseline:g} MB) must be below "
                                         f"the heap ({self.heap:g} MB)")
        return self

    def driver(self, busy: int, waiting: int) -> float:
        return self.baseline + self.memory_per_call * (busy + waiting)

    def factor(self, level: float) -> float:
        free = self.heap - level
        if free <= 0.0:
            return self.max_factor
        return min(self.max_factor, 1.0 + self.cost * level / free)


class Contention(Degradation):
    """``kind: contention``: service time grows with the calls contending beyond ``free``."""

    kind: Literal["contention"]
    of: Literal["in_service", "waiting", "held"] = Field(
        "in_service", description="the calls that contend: in service, waiting, or held "
                                  "(both)")
    free: int = Field(0, ge=0, description="calls that contend at no cost")
    per_call: float = Field(ge=0, le=MAX_FACTOR, description="service time added, as a "
                                                             "fraction, per call beyond free")
    about: ClassVar[str] = "service × (1 + per_call × calls beyond free), the calls " \
                           "in service, waiting or both, lagged"
    fluid: ClassVar[str | None] = "μ / min(max_factor, 1 + per_call·(C − free)⁺), " \
                                  "dC/dt = (N − C) / recovery"

    def driver(self, busy: int, waiting: int) -> float:
        of = self.of
        return float(busy if of == "in_service" else waiting if of == "waiting"
                     else busy + waiting)

    def factor(self, level: float) -> float:
        return min(self.max_factor, 1.0 + self.per_call * max(0.0, level - self.free))


FAMILY = Family("capacity degradation", "degradation", "kind", (Gc, Contention))
Degradations = FAMILY.union()

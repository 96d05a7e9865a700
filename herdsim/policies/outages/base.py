"""What every outage has (a window: ``start``, ``duration``) and :class:`OutageState`, what
the outages holding at a moment do to a call, as pure bookkeeping (no SimPy): the model's
:class:`~herdsim.model.downstream.health.Health` and the testbed's emulator both keep one.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from pydantic import Field

from herdsim.policies.family import Member
from herdsim.policies.fields import NonNegativeDuration, PositiveDuration


class OutageState:
    """The outages holding now: ``down`` and ``blackhole`` count theirs; ``error_rate`` is
    the chance a served call fails (the error outages' rates combined as independent
    failures) and ``slow`` the service-time multiplier (the slow outages' factors
    multiplied), both recomputed by :meth:`refresh`."""

    __slots__ = ("down", "blackhole", "errors", "slows", "error_rate", "slow", "flushes",
                 "flushing")

    def __init__(self) -> None:
        self.down = 0
        self.blackhole = 0
        self.errors: list[float] = []  # the error outages' rates, in the order they began
        self.slows: list[float] = []  # the slow outages' factors
        self.error_rate = 0.0
        self.slow = 1.0
        self.flushes = 0  # flush outages begun so far (a cache empties at each)
        self.flushing = 0  # flush outages holding now (the cache is bypassed)

    def refresh(self) -> None:
        """Combine the error rates and slow factors holding (in the order they began)."""
        failing = 1.0
        for rate in self.errors:
            failing *= 1.0 - rate
        self.error_rate = 1.0 - failing
        slow = 1.0
        for factor in self.slows:
            slow *= factor
        self.slow = slow


class Outage(Member):
    """An outage's window, and what its mode does to :class:`OutageState` while it holds."""

    start: NonNegativeDuration
    duration: PositiveDuration
    replica: int | None = Field(None, ge=0, description="the replica it hits (a tier with "
                                                        "replicas; null: every one)")
    refuses: ClassVar[bool] = False  # every call refused while it holds; the calls in
    # flight fail together at its start
    needs_timeout: ClassVar[bool] = False  # a call hangs until its client's timeout
    needs_cache: ClassVar[bool] = False  # it acts on the tier's cache
    emulated: ClassVar[bool] = True  # herdsim/testbed/emulator.py keeps an OutageState

    @property
    def end(self) -> float:
        return self.start + self.duration

    def label(self) -> str:
        """The outage in a few words (a scenario described: ``slow ×5``)."""
        return self.name()

    @abstractmethod
    def begin(self, state: OutageState) -> None:
        """The outage starts: enter it into *state* (then ``state.refresh()``)."""

    @abstractmethod
    def cease(self, state: OutageState) -> None:
        """The outage ends: take it out of *state* (then ``state.refresh()``)."""

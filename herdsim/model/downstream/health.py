"""The downstream's health: outages and crashes, and what they make of a call.

What each outage mode does is its member's rule (:mod:`herdsim.policies.outages`), kept
in an :class:`~herdsim.policies.outages.OutageState`; here the outages are timed and the
crashes added. ``up`` is false while an outage that refuses calls (``down``) holds or the
downstream has crashed; ``blackhole``, ``error_rate`` and ``slow`` are the state's (see
docs/model.md, Outages). ``on_down`` is called when every call in flight must fail
together: a ``down`` outage starts or the downstream crashes.
"""

from __future__ import annotations

from collections.abc import Callable

from herdsim.policies.outages import OutageState


class Health:
    """The state every outage and crash changes; recomputed at each start and end."""

    def __init__(self, env, outages, on_down: Callable[[], None], crashes: Callable,
                 restart_time: float | None):
        self.env = env
        self.up = True
        self.blackhole = 0
        self.error_rate = 0.0
        self.slow = 1.0
        self.flushes = 0  # flush outages begun (a cache in front compares, see model/cache.py)
        self.flushing = 0
        self._on_down = on_down
        self._crashes = crashes
        self._restart_time = restart_time
        self._outages = OutageState()
        self._crashed = False
        for outage in outages:
            env.process(self._outage(outage))

    def crash(self, now: float) -> None:
        """The downstream falls over now and restarts after ``restart_time``."""
        self._crashes(now)
        self._crashed = True
        self._refresh()
        self._on_down()
        self.env.process(self._restart())

    def _restart(self):
        yield self.env.timeout(self._restart_time)
        self._crashed = False
        self._refresh()

    def _refresh(self) -> None:
        state = self._outages
        state.refresh()
        self.up = not (state.down or self._crashed)
        self.blackhole = state.blackhole
        self.error_rate = state.error_rate
        self.slow = state.slow
        self.flushes = state.flushes
        self.flushing = state.flushing

    def _outage(self, outage):
        yield self.env.timeout(outage.start)
        outage.begin(self._outages)
        if outage.refuses:
            self._on_down()
        self._refresh()
        yield self.env.timeout(outage.duration)
        outage.cease(self._outages)
        self._refresh()

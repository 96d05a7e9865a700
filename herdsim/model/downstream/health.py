"""The downstream's health: outages and crashes, and what they make of a call.

``up`` is false while a ``down`` outage holds or the downstream has crashed;
``blackhole`` counts the blackhole outages holding; ``error_rate`` and ``slow`` combine
the ``error`` and ``slow`` outages holding (see docs/model.md, Outages). ``on_down`` is
called when every call in flight must fail together: a ``down`` outage starts or the
downstream crashes.
"""

from __future__ import annotations

from collections.abc import Callable


class Health:
    """The state every outage and crash changes; recomputed at each start and end."""

    def __init__(self, env, outages, on_down: Callable[[], None], crashes: Callable,
                 restart_time: float | None):
        self.env = env
        self.up = True
        self.blackhole = 0
        self.error_rate = 0.0
        self.slow = 1.0
        self._on_down = on_down
        self._crashes = crashes
        self._restart_time = restart_time
        self._down_outages = 0
        self._crashed = False
        self._errors_active: list[float] = []
        self._slows_active: list[float] = []
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
        self.up = not (self._down_outages or self._crashed)
        failing = 1.0
        for rate in self._errors_active:
            failing *= 1.0 - rate
        self.error_rate = 1.0 - failing
        slow = 1.0
        for factor in self._slows_active:
            slow *= factor
        self.slow = slow

    def _outage(self, outage):
        yield self.env.timeout(outage.start)
        mode = outage.mode
        if mode == "down":
            self._down_outages += 1
            self._on_down()
        elif mode == "blackhole":
            self.blackhole += 1
        elif mode == "error":
            self._errors_active.append(outage.error_rate)
        else:
            self._slows_active.append(outage.factor)
        self._refresh()
        yield self.env.timeout(outage.duration)
        if mode == "down":
            self._down_outages -= 1
        elif mode == "blackhole":
            self.blackhole -= 1
        elif mode == "error":
            self._errors_active.remove(outage.error_rate)
        else:
            self._slows_active.remove(outage.factor)
        self._refresh()

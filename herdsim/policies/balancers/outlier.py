"""The hosts' health as a balancer sees it: passive outlier detection as Envoy runs it,
and active health checks. Pure bookkeeping, no SimPy: the fleet tells it each answer
and ticks it every ``interval``.

Read from Envoy (``source/common/upstream/outlier_detection_impl.cc``, envoyproxy/envoy
commit 00c7146d, the v1.36 line): ``consecutive_5xx`` failures in a row eject a host at
once (the count starts again either way); every ``interval`` an ejected host returns
once ``min(base_ejection_time × its backoff, max_ejection_time)`` has passed since its
ejection (the backoff grows by one an ejection while ``backoff × base <= max``, and
falls by one a sweep once the host has been back a whole interval), and the
success-rate rule runs (hosts with at least
``success_rate_request_volume`` answers in the interval, when there are at least
``success_rate_minimum_hosts`` of them: a host below ``mean − stdev_factor × stdev`` is
ejected). An ejection that would take the ejected share above
``max_ejection_percent`` is not made (unless ``always_eject_one_host`` and none is
ejected). A refused, erroring or timed-out call is a 5xx; a throttled one (429) is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import Period, PositiveDuration


class Envoy(Member):
    """``kind: envoy`` (the default): Envoy's outlier detection, consecutive 5xx and
    success rate."""

    kind: Literal["envoy"] = "envoy"
    consecutive_5xx: int | None = Field(5, ge=1, le=1_000_000,
                                        description="failures in a row that eject a host "
                                                    "(null: off)")
    interval: Period = Field(10.0, description="time between sweeps (uneject, success rate)")
    base_ejection_time: PositiveDuration = Field(30.0, description="ejection time × the "
                                                                   "host's ejection count")
    max_ejection_time: PositiveDuration = Field(300.0, description="the longest ejection")
    max_ejection_percent: float = Field(10.0, ge=0, le=100,
                                        description="ejected hosts at most, percent")
    always_eject_one_host: bool = False
    success_rate: bool = Field(True, description="the success-rate rule (Envoy enforces it "
                                                 "by default)")
    success_rate_minimum_hosts: int = Field(5, ge=1, le=1_000_000)
    success_rate_request_volume: int = Field(100, ge=1, le=1_000_000)
    success_rate_stdev_factor: float = Field(1.9, ge=0, le=100)
    about: ClassVar[str] = "eject a host after consecutive_5xx failures or a success rate " \
                           "below mean − factor × stdev, for base_ejection_time × its " \
                           "ejections (Envoy)"

    def ejector(self, n: int) -> Ejector:
        """The detector's state for *n* hosts."""
        return Ejector(self, n)


class Ejector:
    """Envoy's detector over *n* hosts: :meth:`heard` each answer, :meth:`tick` each
    interval; ``ejected[i]`` is host *i*'s state, ``ejections`` the count so far."""

    def __init__(self, cfg: Envoy, n: int):
        self.cfg = cfg
        self.n = n
        self.ejected = [False] * n
        self.backoff = [0] * n  # Envoy's ejectTimeBackoff
        self.since = [0.0] * n  # the last ejection
        self.back: list[float | None] = [None] * n  # the last unejection
        self.consecutive = [0] * n
        self.ok = [0] * n
        self.total = [0] * n
        self.active = 0
        self.ejections = 0

    def heard(self, host: int, failed: bool, now: float) -> bool:
        """Host *host* answered (*failed*: a 5xx) at *now*: whether it is ejected now.
        The count of failures in a row fires when it reaches ``consecutive_5xx`` and
        starts again (an ejected host's goes on counting, unheard, until it is back)."""
        self.total[host] += 1
        if not failed:
            self.ok[host] += 1
            self.consecutive[host] = 0
            return False
        self.consecutive[host] += 1
        if self.consecutive[host] != self.cfg.consecutive_5xx or self.ejected[host]:
            return False
        self.consecutive[host] = 0
        return self.eject(host, now)

    def eject(self, host: int, now: float) -> bool:
        """Eject *host* now if the maximum ejected share allows: whether it did."""
        cfg = self.cfg
        allowed = 100.0 * (self.active + 1) / self.n <= cfg.max_ejection_percent
        if not (allowed or (cfg.always_eject_one_host and self.active == 0)):
            return False
        self.ejected[host] = True
        self.active += 1
        self.ejections += 1
        self.since[host] = now
        base = cfg.base_ejection_time
        if self.backoff[host] * base < cfg.max_ejection_time + base:
            self.backoff[host] += 1
        return True

    def ejection_time(self, host: int) -> float:
        """How long *host*'s current ejection lasts."""
        cfg = self.cfg
        return min(cfg.base_ejection_time * self.backoff[host], cfg.max_ejection_time)

    def tick(self, now: float) -> list[int]:
        """The interval's sweep at *now* (Envoy's ``onIntervalTimer``): hosts whose time
        is up come back, the success-rate rule runs, and a host in for a whole interval
        since it came back has its backoff lowered by one. Returns the hosts whose state
        changed."""
        changed = []
        for host in range(self.n):
            if self.ejected[host] and self.ejection_time(host) <= now - self.since[host]:
                self.ejected[host] = False
                self.active -= 1
                self.consecutive[host] = 0
                self.back[host] = now
                changed.append(host)
        if self.cfg.success_rate:
            changed += [h for h in self._low_success() if self.eject(h, now)]
        interval = self.cfg.interval
        for host in range(self.n):
            back = self.back[host]
            if (not self.ejected[host] and back is not None and now - back >= interval
                    and self.backoff[host]):
                self.backoff[host] -= 1
        self.ok = [0] * self.n
        self.total = [0] * self.n
        return changed

    def _low_success(self) -> list[int]:
        cfg = self.cfg
        if self.n < cfg.success_rate_minimum_hosts:
            return []
        rates = {h: self.ok[h] / self.total[h] for h in range(self.n)
                 if self.total[h] >= cfg.success_rate_request_volume and not self.ejected[h]}
        if len(rates) < cfg.success_rate_minimum_hosts:
            return []
        mean = sum(rates.values()) / len(rates)
        stdev = math.sqrt(sum((r - mean) ** 2 for r in rates.values()) / len(rates))
        threshold = mean - cfg.success_rate_stdev_factor * stdev
        return [h for h, r in rates.items() if r < threshold]


class Active(Member):
    """``kind: active`` (the default): a probe to every host each ``interval``."""

    kind: Literal["active"] = "active"
    interval: Period = Field(description="time between probes of one host")
    unhealthy_threshold: int = Field(3, ge=1, le=1000,
                                     description="failed probes in a row that mark it down")
    healthy_threshold: int = Field(2, ge=1, le=1000,
                                   description="passed probes in a row that mark it up")
    about: ClassVar[str] = "probe every host each interval: unhealthy_threshold failures " \
                           "in a row mark it down, healthy_threshold passes up again"

    def checker(self, n: int) -> Checker:
        """The checks' state for *n* hosts."""
        return Checker(self, n)


class Checker:
    """Active health checks over *n* hosts: :meth:`probed` each probe's result."""

    def __init__(self, cfg: Active, n: int):
        self.cfg = cfg
        self.failing = [False] * n
        self.streak = [0] * n  # probes in a row contrary to the host's state

    def probed(self, host: int, passed: bool) -> bool:
        """Host *host*'s probe *passed* or not: whether its state changed."""
        if passed != self.failing[host]:  # agrees with its state
            self.streak[host] = 0
            return False
        self.streak[host] += 1
        threshold = (self.cfg.healthy_threshold if self.failing[host]
                     else self.cfg.unhealthy_threshold)
        if self.streak[host] < threshold:
            return False
        self.failing[host] = not self.failing[host]
        self.streak[host] = 0
        return True


def probe_passes(up: bool, blackhole: int, error_rate: float, draw: Callable[[], float]) -> bool:
    """A probe's result against a host in that state (an error answer fails it)."""
    return up and not blackhole and not (error_rate and draw() < error_rate)


OUTLIER = Family("outlier detection", "outlier detection", "kind", (Envoy,), default="envoy")
OutlierDetection = OUTLIER.union()
HEALTH_CHECK = Family("health check", "health check", "kind", (Active,), default="active")
HealthCheck = HEALTH_CHECK.union()

"""Balancers that ignore load: round robin, random and weighted round robin.

Read from Envoy (envoyproxy/envoy commit 00cf9a05, the v1.36 line):
``round_robin/round_robin_lb.h`` keeps one index per host list, starting at a random
seed, and returns ``hosts[index++ % len(hosts)]``; ``random/random_lb.cc`` returns
``hosts[random() % len(hosts)]``; with weights that differ, ``common/edf_scheduler.h``
picks the host with the earliest deadline, a host of weight ``w`` due ``1/w`` after its
last pick (ties in the order the hosts were added). gRPC's client-side ``round_robin``
(grpc/grpc ``src/core/load_balancing/round_robin``) starts at a random index too.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from herdsim.policies.balancers.base import MAX_REPLICAS, Balancer, index
from herdsim.policies.fields import FieldError


class RoundRobin(Balancer):
    """``kind: round_robin``: the next host in turn, from a random start."""

    kind: Literal["round_robin"] = "round_robin"
    about: ClassVar[str] = "the next host in turn, from a random start (Envoy ROUND_ROBIN, " \
                           "gRPC round_robin)"

    def picker(self, n: int, draw: Callable[[], float]) -> _RoundRobin:
        return _RoundRobin(index(draw, 1 << 32))


class _RoundRobin:
    __slots__ = ("i",)

    def __init__(self, seed: int):
        self.i = seed

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        i = self.i
        self.i = i + 1
        return hosts[i % len(hosts)]

    again = pick  # a retry's second pick: the same rule, drawn again


class Random(Balancer):
    """``kind: random``: a host drawn uniformly."""

    kind: Literal["random"]
    about: ClassVar[str] = "a host drawn uniformly (Envoy RANDOM)"

    def picker(self, n: int, draw: Callable[[], float]) -> _Random:
        return _Random(draw)


class _Random:
    __slots__ = ("draw",)

    def __init__(self, draw: Callable[[], float]):
        self.draw = draw

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        return hosts[index(self.draw, len(hosts))]

    again = pick  # a retry's second pick: the same rule, drawn again


class Weighted(Balancer):
    """``kind: weighted``: weighted round robin by earliest deadline first."""

    kind: Literal["weighted"]
    weights: list[float] = Field(max_length=MAX_REPLICAS,
                                 description="one positive weight per replica, in order")
    about: ClassVar[str] = "round robin in proportion to each replica's weight, earliest " \
                           "deadline first (Envoy's EDF scheduler)"

    @model_validator(mode="after")
    def _positive(self) -> Weighted:
        if not self.weights or min(self.weights) <= 0:
            raise FieldError("weights", "every weight must be positive")
        return self

    def picker(self, n: int, draw: Callable[[], float]) -> Edf:
        return Edf(self.weights[:n])


class Edf:
    """Envoy's EDF scheduler over the eligible hosts: each host's next deadline is its
    last one plus ``1 / weight``; the earliest is picked, ties in the order the entries
    went in (Envoy's ``order_offset``)."""

    __slots__ = ("weights", "_heap", "_hosts", "_deadline", "_order")

    def __init__(self, weights: Sequence[float]):
        self.weights = list(weights)
        self._hosts: tuple[int, ...] = ()
        self._heap: list[tuple[float, int, int]] = []
        self._deadline = 0.0
        self._order = 0

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        if tuple(hosts) != self._hosts:  # the eligible set changed: a fresh schedule
            self._hosts = tuple(hosts)
            self._heap = []
            for h in hosts:
                self._push(self._deadline + 1.0 / self.weights[h], h)
        due, _, host = heapq.heappop(self._heap)
        self._deadline = due
        self._push(due + 1.0 / self.weights[host], host)
        return host

    def _push(self, due: float, host: int) -> None:
        heapq.heappush(self._heap, (due, self._order, host))
        self._order += 1

    again = pick  # a retry's second pick: the same rule, drawn again

"""Least request with N random choices (Envoy's ``LEAST_REQUEST``).

Read from Envoy (``least_request/least_request_lb.cc``, envoyproxy/envoy commit
0a31a547, the v1.36 line): ``unweightedHostPickNChoices`` draws ``choice_count`` hosts
uniformly (with replacement, ``random() % size``) and keeps the first one with strictly
fewer active requests than the candidate so far; ``choice_count: 2`` (the default) is
power-of-two choices. ``selection_method: full_scan`` scans every host and breaks ties
uniformly by reservoir sampling. With weights that differ, the host's weight is
``weight / (active + 1) ** active_request_bias`` in the EDF scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.balancers.base import Balancer, index


class LeastRequest(Balancer):
    """``kind: least_request``: the least loaded of ``choice_count`` random hosts."""

    kind: Literal["least_request"]
    choice_count: int = Field(2, ge=2, le=100, description="hosts drawn per pick "
                                                             "(2: power-of-two choices)")
    selection_method: Literal["n_choices", "full_scan"] = Field(
        "n_choices", description="full_scan: every host, ties broken at random")
    about: ClassVar[str] = "the fewest calls in flight of choice_count random hosts " \
                           "(Envoy LEAST_REQUEST; 2: power-of-two choices)"
    fluid: ClassVar[str | None] = "supermarket model: fraction of hosts with ≥ k calls " \
                                  "λ^((d^k − 1)/(d − 1))"

    def picker(self, n: int, draw: Callable[[], float]) -> _NChoices | _FullScan:
        if self.selection_method == "full_scan":
            return _FullScan(draw)
        return _NChoices(self.choice_count, draw)


class _NChoices:
    __slots__ = ("d", "draw")

    def __init__(self, d: int, draw: Callable[[], float]):
        self.d, self.draw = d, draw

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        draw, size = self.draw, len(hosts)
        best = hosts[index(draw, size)]
        for _ in range(self.d - 1):
            sampled = hosts[index(draw, size)]
            if active[sampled] < active[best]:
                best = sampled
        return best

    again = pick  # a retry's second pick: the same rule, drawn again


class _FullScan:
    __slots__ = ("draw",)

    def __init__(self, draw: Callable[[], float]):
        self.draw = draw

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        best, tied = hosts[0], 1
        for host in hosts[1:]:
            if active[host] < active[best]:
                best, tied = host, 1
            elif active[host] == active[best]:
                tied += 1
                if index(self.draw, tied) == 0:
                    best = host
        return best

    again = pick  # a retry's second pick: the same rule, drawn again

"""Calls per job at every tier: the multipliers of the call graph, by one iterative walk.

A job's call to the workers' downstream is tried ``1 + retry.max_retries`` times (or sent
as ``hedging.max_attempts`` copies); each of those calls, served, makes every edge's
``count`` calls to the next tier, each tried ``1 + max_retries`` times (or hedged). So the
calls reaching a tier per job multiply along every path to it, and add over the paths:

    calls[top]    = attempts(workers' retry or hedging) x deliveries (without a DLQ)
    calls[callee] += calls[caller] x edge.count x attempts(edge's retry or hedging)

walked in topological order (Kahn's algorithm, no recursion: a long chain costs a loop,
not a stack). Two figures per tier: ``most``, an upper bound (every call takes all its
retries, every hedged copy is sent), and ``likely``, the figure the cost estimate uses
(retries only while something is disturbed, a hedged call's first copy, and behind a
cache only its misses: :mod:`herdsim.planning.cache`). A mechanism
that multiplies calls adds its factor to :func:`attempts`.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from herdsim.config import graph
from herdsim.config.scenario import Scenario
from herdsim.planning import cache

UNBOUNDED_RETRIES = 20  # retries per call assumed when max_retries is null


@dataclass(frozen=True)
class Tier:
    """Calls reaching one tier per job that enters the system: ``most`` at most (when
    ``unlimited`` is false), ``likely`` as the estimate expects."""

    name: str
    most: float
    likely: float
    unlimited: bool = False  # some path retries without limit: most assumes 20 a call


def attempts(retry, hedging, disturbed: float) -> tuple[float, float, bool]:
    """``(most, likely, unlimited)`` tries of one call: hedged copies, or 1 + retries.

    *disturbed* is the share of the run something is down or recovering (retries then).
    Hedged copies after the first go only while no answer came, and a fast fatal failure
    ends them all: how many, the run decides (measured at delay 0 with 100 copies: 1 a
    call against a downstream they knock over, 23 against one that queues them), so
    ``likely`` counts the first and the bound all of them."""
    if hedging is not None:
        return float(hedging.max_attempts), 1.0, False
    limit = retry.max_retries
    retries = UNBOUNDED_RETRIES if limit is None else limit
    return 1.0 + retries, 1.0 + retries * disturbed, limit is None


def deliveries(scenario: Scenario) -> float:
    """How often one job may be taken from the main queue at most: once, or without a DLQ
    once more every ``dlq.redelivery_delay`` (a job that gave up waits that long)."""
    if scenario.dlq.enabled or scenario.workers.count is None:
        return 1.0
    return 1.0 + math.floor(scenario.duration / scenario.dlq.redelivery_delay)


def walk(scenario: Scenario, disturbed: float) -> list[Tier]:
    """Every tier's calls per job, the workers' downstream first, then in topological
    order (tiers no call reaches: none). Iterative, in time linear in tiers and edges."""
    every = graph.tiers(scenario.downstream, scenario.services)
    top = graph.top_name(scenario.downstream)
    most, likely, unlimited = attempts(scenario.retry, scenario.hedging, disturbed)
    most *= deliveries(scenario)
    reach = {name: [0.0, 0.0, False] for name in every}
    reach[top] = [most, likely, unlimited]
    waiting = dict.fromkeys(every, 0)
    for tier in every.values():
        for edge in tier.calls:
            if edge.service in waiting:
                waiting[edge.service] += 1
    ready = deque(name for name, n in waiting.items() if n == 0)
    order: list[str] = []
    while ready:
        name = ready.popleft()
        order.append(name)
        here = reach[name]
        cached = every[name].cache  # a cache in front: only its misses make the edges' calls
        missing = cache.miss_share(cached) if cached is not None else 1.0
        for edge in every[name].calls:
            if edge.service not in every:
                continue
            e_most, e_likely, e_unlimited = attempts(edge.retry, edge.hedging, disturbed)
            there = reach[edge.service]
            there[0] += here[0] * edge.count * e_most
            there[1] += here[1] * missing * edge.count * e_likely
            there[2] = there[2] or ((here[2] or e_unlimited) and here[0] > 0)
            waiting[edge.service] -= 1
            if waiting[edge.service] == 0:
                ready.append(edge.service)
    return [Tier(name, reach[name][0], reach[name][1], bool(reach[name][2]))
            for name in order if reach[name][0] > 0]

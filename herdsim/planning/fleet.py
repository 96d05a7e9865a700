"""The work of replicas behind a balancer (``replicas``, ``balancer``,
``outlier_detection``, ``health_check``): what their pools and views hold and how often
their sweeps and probes tick, for :mod:`herdsim.planning.estimate`."""

from __future__ import annotations

from herdsim.config import graph
from herdsim.config.scenario import Scenario
from herdsim.policies.balancers import hashing

BYTES_PER_REPLICA = 50_000  # a pool: its objects, timers and streams' blocks
BYTES_PER_REPLICA_ROW = 64  # its columns (calls, in flight, health, ejections) a row
BYTES_PER_VIEW_HOST = 40  # a client-scoped view: a count a replica, and its picker
BYTES_PER_TABLE_ENTRY = 40  # a ring point (its hash and owner) or a Maglev slot


def fleet_bytes(scenario: Scenario, callers: float, rows: int) -> float:
    """What the tiers' replicas hold: each a pool with its columns, a client-scoped
    balancer a view per caller (*callers*: the workers, or every open-loop job), a hash
    balancer its tables (one per set of healthy replicas, ``hashing.BUILT`` at most) and
    the hashes of request keys (``hashing.HASHES_KEPT`` at most)."""
    total = 0.0
    for cfg in graph.tiers(scenario.downstream, scenario.services).values():
        n = cfg.replicas
        if n is None:
            continue
        total += n * (BYTES_PER_REPLICA + rows * BYTES_PER_REPLICA_ROW)
        member = cfg.balancer
        if member is not None and member.keyed:
            total += (hashing.BUILT * (member.table_entries() + n) * BYTES_PER_TABLE_ENTRY
                      + callers * 100 + 100 * min(hashing.HASHES_KEPT, (scenario.workload.keys
                      or 0) + (hashing.HASHES_KEPT if cfg.cache is not None else 0)))
        elif member is not None and member.scope == "client":
            total += callers * (n * BYTES_PER_VIEW_HOST + 200)
    return total


def fleet_ticks(scenario: Scenario) -> float:
    """The fleets' sweeps and probes: every interval, a step per replica."""
    total = 0.0
    for cfg in graph.tiers(scenario.downstream, scenario.services).values():
        for part in (cfg.outlier_detection, cfg.health_check):
            if cfg.replicas is not None and part is not None:
                total += scenario.duration / part.interval * cfg.replicas
    return total

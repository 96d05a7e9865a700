"""The fluid model's integration: one tier's mean flows, a step of ``dt`` at a time.

State (all fluid amounts, not counts of individuals): the main queue, the workers busy,
the calls in service (live ones, and ``waste``: calls whose client left), the waiting
room as a FIFO ring of amounts by the step they entered (so a timeout is the entry that
reaches the timeout's age), and the retries to come as rows of a table indexed by the
step they land in. Every call carries its class: retry number k (0: the first try) and
whether its job is poison; the downstream's calls share one mix (``mix``: how many of
each class), so the calls that leave it (served, timed out, failed together) take its
proportions.

Per step: the scheduled client failures (a doomed call's or a blackholed one's), the
served calls (exponential: a share ``1 - exp(-dt / mean)`` of the slots, a mean-field
rate), the waiting room's head into the freed slots, the calls whose wait reached the
timeout, then the step's arrivals (first tries of new jobs as workers free up, and the
retries landing now), held by an open breaker, let through by the rate limit's tokens
(:mod:`herdsim.fluid.bucket`), refused while down, crashing it past the collapse rule
(a herd a closing breaker lets go cut where it trips again:
:func:`~herdsim.fluid.loop.held_back`), else into a slot, the room or refused: the first
tries of the workers a success freed take their places first (they call in the instant
the place frees), the rest share what is left. Failures at retry k land k's sleep kernel
later (a delta stays a delta, a jitter spreads it); past the last retry they are
dead-lettered.

The loop is over scalars and a few short vectors (the classes): its cost is the number
of steps, not the population.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from herdsim.config.scenario import Scenario
from herdsim.fluid import loop
from herdsim.fluid.bucket import TokenLaw
from herdsim.fluid.inputs import Grid, Kernel
from herdsim.policies.fluid_gate import FluidGate


@dataclass
class Flows:
    """Per step: the counters (events in the step) and the gauges (at the step's start)."""

    attempts: np.ndarray
    randomised: np.ndarray  # attempts of random timing: Poisson tries, jittered sleeps, and
    # sleeps after failures at random instants (service ends; a timeout or a refusal keeps
    # the timing its calls arrived with); a breaker's held calls leave as one cohort
    success: np.ndarray
    retry: np.ndarray
    failed_dlq: np.ndarray
    rejected: np.ndarray
    timeouts: np.ndarray
    errors: np.ndarray
    wasted: np.ndarray
    crashes: np.ndarray
    in_flight: np.ndarray
    waiting: np.ndarray
    queue_depth: np.ndarray
    delayed: np.ndarray
    downstream_up: np.ndarray
    collapse_load: np.ndarray  # calls counted by the collapse rule's window, while up
    budget_refused: np.ndarray  # retries the budget refused (their jobs dead-lettered)
    short_circuited: np.ndarray  # calls an open breaker held back
    breaker_open: np.ndarray  # 1 while the breaker holds the calls


def integrate(scenario: Scenario, grid: Grid) -> Flows:
    """Run the fluid model of *scenario* on *grid*: its inputs laid out as numbers and
    arrays for the compiled loop (:func:`herdsim.fluid.loop.run`)."""
    ds, wl = scenario.downstream, scenario.workload
    n, dt = grid.n, grid.dt
    workers = scenario.workers.count
    timeout = ds.timeout
    collapse = ds.overload.collapse
    threshold = math.inf if collapse is None or collapse.threshold is None \
        else float(collapse.threshold)
    load_limit = math.inf if collapse is None or collapse.load_limit is None \
        else float(collapse.load_limit)
    limit = ds.rate_limit
    budget = None if scenario.budget is None else scenario.budget.fluid_gate(dt)
    breaker = scenario.breaker.fluid_gate(dt, workers or 1, ds.service.mean)
    series = loop.run(
        n, dt, len(grid.kernels), *_layout(grid.kernels), *_layout(grid.hint_kernels),
        workers is not None, float(workers or 0), float(wl.backlog), float(ds.concurrency),
        math.inf if ds.queue_limit is None else float(ds.queue_limit),
        n + 1 if timeout is None else max(1, int(round(timeout / dt))), ds.serve_abandoned,
        ds.service.mean, 1.0 - np.exp(-dt / (ds.service.mean * grid.slow)),
        grid.slow.astype(float), threshold, load_limit,
        1 if collapse is None else max(1, int(round(collapse.window / dt))),
        0 if collapse is None else int(round(collapse.restart_time / dt)),
        float(wl.poison_fraction), scenario.retry.poison_retryable,
        wl.source().name() != "constant",
        limit is not None, *_bucket(limit, dt),
        grid.down.astype(np.bool_), grid.fail_all.astype(np.bool_),
        grid.blackhole.astype(np.bool_), grid.error_rate.astype(float),
        grid.jobs.astype(float),
        budget is not None, *_arrays(budget), breaker is not None, *_arrays(breaker))
    return Flows(*series)


def _layout(kernels: tuple[Kernel, ...]) -> tuple[np.ndarray, ...]:
    """Kernels as arrays: each one's offset, start in the joined masses, size; the masses."""
    sizes = np.array([k.mass.size for k in kernels], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if kernels \
        else np.zeros(0, dtype=np.int64)
    masses = np.concatenate([k.mass for k in kernels]).astype(float) if kernels \
        else np.zeros(0)
    return (np.array([k.offset for k in kernels], dtype=np.int64), starts, sizes, masses)


def _bucket(limit, dt: float) -> tuple[np.ndarray, ...]:
    """A rate limit's tokens as a distribution (:class:`~herdsim.fluid.bucket.TokenLaw`):
    its cells, numbers and cells' edges (none: placeholders the loop never reads)."""
    if limit is None:
        return (np.zeros(1), np.zeros(4), np.zeros(2))
    law = TokenLaw(limit.rate, float(limit.burst), dt)
    return (law.cells, law.meta, law.edges)


def _arrays(gate: FluidGate | None) -> tuple[np.ndarray, np.ndarray]:
    """A gate's parameters and state (without one: placeholders the loop never reads)."""
    return (np.zeros(1), np.zeros(1)) if gate is None else (gate.params, gate.state)

"""What the fluid model reads of a scenario, on its time grid: the jobs arriving in each
step, the outages' effect in each step (asked of the outage members through
:class:`~herdsim.policies.outages.base.OutageState`) and each retry's sleep kernel (asked
of the backoff strategy: :meth:`~herdsim.policies.backoff.base.Strategy.sleep_pdf`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from herdsim.config import trace as traces
from herdsim.config.scenario import Scenario
from herdsim.fluid.bucket import WORK_CELLS
from herdsim.policies.arrivals.piecewise import Piecewise
from herdsim.policies.outages.base import OutageState
from herdsim.policies.retry_after import rule

STEP = 0.002  # s: the prototype found a 10 ms step halves the herd's peaks
UNLIMITED_RETRIES = 20  # max_retries: null, as the work estimate assumes
TRACE_CHUNK = 1 << 20  # a trace's times counted at a time


@dataclass(frozen=True)
class Kernel:
    """Where one retry's sleep puts the call, in steps from the failure: ``offset`` the
    first non-empty cell, ``mass`` the shares from there (one cell: a delta)."""

    offset: int
    mass: np.ndarray

    @property
    def spread(self) -> bool:
        """Whether the sleep is random (more than one cell)."""
        return self.mass.size > 1


@dataclass(frozen=True)
class Grid:
    """The scenario on the fluid model's time grid (``n`` steps of ``dt`` seconds)."""

    dt: float
    n: int
    jobs: np.ndarray  # jobs arriving in each step
    down: np.ndarray  # bool: every call refused (an outage that refuses)
    fail_all: np.ndarray  # bool: the calls in flight fail together at this step
    blackhole: np.ndarray  # bool: calls hang until their client's timeout
    error_rate: np.ndarray  # chance a served call fails
    slow: np.ndarray  # service-time multiplier
    kernels: tuple[Kernel, ...]  # kernels[k]: the sleep before retry k + 1
    hint_kernels: tuple[Kernel, ...] = ()  # the same after a refusal carrying Retry-After


def step_for(scenario: Scenario) -> float:
    """The step: 2 ms, or less so that a bin and the peak window hold whole steps."""
    dt = min(STEP, scenario.peak_window / 2, scenario.bin / 2)
    per_bin = max(1, math.ceil(scenario.bin / dt - 1e-9))
    return scenario.bin / per_bin


def steps(scenario: Scenario, dt: float) -> int:
    """Steps of *dt* in the run."""
    return int(round(scenario.duration / dt))


def retries(scenario: Scenario) -> int:
    """Retries a call may take (``max_retries``, or the estimate's 20 without a limit)."""
    count = scenario.retry.max_retries
    return UNLIMITED_RETRIES if count is None else count


def kernel_cells(scenario: Scenario, dt: float) -> int:
    """The bound of the cells in every sleep kernel (each at most its cap, and the run),
    plus a rate limit's token distribution in the same cells' worth of work a step."""
    n = steps(scenario, dt)
    bucket = 0 if scenario.downstream.rate_limit is None else WORK_CELLS
    return retries(scenario) * min(n + 1, int(scenario.retry.cap / dt) + 2) + bucket


def build(scenario: Scenario, dt: float) -> Grid:
    """The scenario on a grid of step *dt*."""
    n = steps(scenario, dt)
    mids = (np.arange(n) + 0.5) * dt
    down, fail_all, blackhole, error_rate, slow = outages(scenario, n, dt)
    kernels = sleep_kernels(scenario, dt, n)
    return Grid(dt, n, arrivals(scenario, mids, dt), down, fail_all, blackhole, error_rate,
                slow, kernels, hint_kernels(scenario, dt, kernels))


def arrivals(scenario: Scenario, mids: np.ndarray, dt: float) -> np.ndarray:
    """Jobs arriving in each step: the rate (profile, ramps, spikes) at the step's middle
    times the step (exact for linear pieces), or the trace's arrivals counted per step."""
    wl = scenario.workload
    if wl.trace is not None:
        return trace_counts(wl.trace, mids.size, dt)
    rate = Piecewise(wl)
    edges = np.asarray(rate.edges)
    i = np.searchsorted(edges, mids, side="right") - 1
    starts = edges[i]
    levels = np.array([p[0] for p in rate.pieces])[i]
    slopes = np.array([p[1] for p in rate.pieces])[i]
    return np.maximum(levels + slopes * (mids - starts), 0.0) * dt


def trace_counts(trace, n: int, dt: float) -> np.ndarray:
    """A trace's arrivals (× ``time_scale``, + ``start``) counted per step, read a chunk
    at a time (a long trace never sits in memory whole); those after the run dropped."""
    counts = np.zeros(n)
    times = traces.times(trace.file, trace.format)
    while True:
        chunk = np.fromiter(itertools.islice(times, TRACE_CHUNK), dtype=float)
        if chunk.size == 0:
            return counts
        steps = ((chunk * trace.time_scale + trace.start) / dt).astype(np.int64)
        steps = steps[steps < n]
        counts += np.bincount(steps, minlength=n)[:n]


def outages(scenario: Scenario, n: int, dt: float) -> tuple[np.ndarray, ...]:
    """Per step: down, calls failing together, blackhole, error rate and slow factor, from
    the outage members' own bookkeeping (each begins and ceases on the grid)."""
    down = np.zeros(n, bool)
    fail_all = np.zeros(n, bool)
    blackhole = np.zeros(n, bool)
    error_rate = np.zeros(n)
    slow = np.ones(n)
    events = sorted([(o.start, 1, o) for o in scenario.downstream.outages]
                    + [(o.end, 0, o) for o in scenario.downstream.outages],
                    key=lambda e: (e[0], e[1]))
    state = OutageState()
    for t, begins, outage in events:
        at = min(n, int(round(t / dt)))
        if begins:
            outage.begin(state)
            if outage.refuses and at < n:
                fail_all[at] = True
        else:
            outage.cease(state)
        state.refresh()
        down[at:] = state.down > 0
        blackhole[at:] = state.blackhole > 0
        error_rate[at:] = state.error_rate
        slow[at:] = state.slow
    return down, fail_all, blackhole, error_rate, slow


def hint_kernels(scenario: Scenario, dt: float, kernels: tuple[Kernel, ...]
                 ) -> tuple[Kernel, ...]:
    """The sleeps after a refusal that carried the downstream's ``retry_after`` (a fixed
    hint), as the client heeds it (:func:`herdsim.policies.retry_after.rule`): ``use``, a
    delta at the hint; ``at_least``, each sleep of the policy lengthened to the hint, by
    at most ``retry_after_limit``. Empty when the client ignores hints or none is sent."""
    hint = scenario.downstream.retry_after
    heed = rule(scenario.retry.retry_after, scenario.retry.retry_after_limit)
    if heed is None or not isinstance(hint, (int, float)):
        return ()
    out = []
    for kernel in kernels:
        delays = (kernel.offset + np.arange(kernel.mass.size)) * dt
        heard = np.array([heed(d, float(hint)) for d in delays])
        cells = np.maximum(np.rint(heard / dt).astype(np.int64), 1)
        first = int(cells.min())
        mass = np.bincount(cells - first, weights=kernel.mass)
        out.append(Kernel(first, mass / mass.sum()))
    return tuple(out)


def sleep_kernels(scenario: Scenario, dt: float, n: int) -> tuple[Kernel, ...]:
    """One kernel per retry, from the strategy's own sleep distribution (its ``fluid``
    form, :meth:`~herdsim.policies.backoff.base.Strategy.sleep_pdf`); a sleep beyond the
    run lands after it. At least one step: a call retried lands in a later step."""
    strategy = scenario.retry.build()
    out = []
    for k in range(retries(scenario)):
        mass = strategy.sleep_pdf(k, dt, n + 1)
        assert mass is not None  # refused before: see herdsim.fluid.support
        mass = mass.copy()
        mass[1] += mass[0]  # a sleep shorter than half a step: the next step
        mass[0] = 0.0
        nz = np.flatnonzero(mass > 1e-12)
        first, last = int(nz[0]), int(nz[-1])
        out.append(Kernel(first, mass[first:last + 1] / mass[first:last + 1].sum()))
    return tuple(out)

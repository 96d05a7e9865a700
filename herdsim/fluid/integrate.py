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
(a herd a closing breaker lets go cut where it trips again: :func:`held_back`), else
into a slot, the room or refused: the first tries of the workers a success freed take
their places first (they call in the instant the place frees), the rest share what is
left. Failures at retry k land k's sleep kernel later (a delta stays a delta, a jitter
spreads it); past the last retry they are dead-lettered.

The loop is over scalars and a few short vectors (the classes): its cost is the number
of steps, not the population.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from herdsim.config.scenario import Scenario
from herdsim.fluid.bucket import TokenLaw
from herdsim.fluid.inputs import Grid

TINY = 1e-9  # an amount below this is nothing
GATHER = 5  # steps whose failures into a jittered sleep are spread together: each lands
# up to 4 steps (8 ms) late, a shift far below a jitter's width, for a fifth of the work


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


def integrate(scenario: Scenario, grid: Grid) -> Flows:  # noqa: C901, PLR0912, PLR0915
    """Run the fluid model of *scenario* on *grid* (one long loop: its locals are the
    state, read and written without attribute look-ups)."""
    ds, wl = scenario.downstream, scenario.workload
    n, dt = grid.n, grid.dt
    kernels = grid.kernels
    nk = len(kernels)
    classes = nk + 1  # retry number 0..nk; poison calls in a second block
    workers = scenario.workers.count
    slots = float(ds.concurrency)
    room_limit = math.inf if ds.queue_limit is None else float(ds.queue_limit)
    timeout = ds.timeout
    t_steps = n + 1 if timeout is None else max(1, int(round(timeout / dt)))
    keep_abandoned = ds.serve_abandoned
    mean = ds.service.mean
    served_share = (1.0 - np.exp(-dt / (mean * grid.slow))).tolist()
    slow = grid.slow.tolist()
    collapse = ds.overload.collapse
    threshold = math.inf if collapse is None or collapse.threshold is None \
        else float(collapse.threshold)
    load_limit = math.inf if collapse is None or collapse.load_limit is None \
        else float(collapse.load_limit)
    w_steps = 1 if collapse is None else max(1, int(round(collapse.window / dt)))
    restart = 0 if collapse is None else int(round(collapse.restart_time / dt))
    poison = wl.poison_fraction
    poison_retries = scenario.retry.poison_retryable
    random_tries = wl.source().name() != "constant"

    span = max(k.offset + k.mass.size for k in kernels) if kernels else 1
    retries = np.zeros((2 * classes, n + span + 1))  # calls landing at each step, by
    # class (class-major: a kernel spread writes one contiguous row)
    retries_total = np.zeros(n + span + 1)
    retries_random = np.zeros(n + span + 1)
    doomed = np.zeros((n + t_steps + 2, 2 * classes))  # client failures to come
    doomed_any = [False] * (n + t_steps + 2)
    ring_size = t_steps + 2
    room = [0.0] * ring_size
    window = [0.0] * w_steps
    # lists while it runs (a list's item is cheaper to set than an array's), arrays at the end
    out = Flows(*([0.0] * n for _ in range(19)))  # type: ignore[arg-type]
    gate = None if scenario.budget is None else scenario.budget.fluid_gate(dt)
    breaker = scenario.breaker.fluid_gate(dt, workers or 1, mean)
    limit = ds.rate_limit  # its tokens' distribution (a mean bucket misses its bursts)
    bucket = None if limit is None else TokenLaw(limit.rate, float(limit.burst), dt)
    hint_kernels = grid.hint_kernels  # the sleeps after a refusal that carried a hint
    hinted = np.zeros(2 * classes)  # this step's failures that heard Retry-After
    any_hinted = False
    held_calls = np.zeros(2 * classes)  # calls an open breaker holds, by class
    held_count = 0.0  # (let go together: a cohort, whatever timing they came with)
    first_ok = 0.0  # first tries served this step (for the budget)
    mix = np.zeros(2 * classes)  # the live calls in the downstream, by class
    poison_classes = np.repeat([0.0, 1.0], classes)  # 1 on the poison block, else 0
    plain_classes = 1.0 - poison_classes
    queue, busy, live_served, waste, abandoned, waiting = float(wl.backlog), 0.0, 0.0, \
        0.0, 0.0, 0.0
    sleeping, head, in_window, crashed_until = 0.0, 0, 0.0, -1
    down, fail_all, blackhole, error_rate = grid.down.tolist(), grid.fail_all.tolist(), \
        grid.blackhole.tolist(), grid.error_rate.tolist()
    jobs = grid.jobs.tolist()
    landing_total = retries_total  # (read one step at a time)
    held_plain, held_bad, held = [0.0] * nk, [0.0] * nk, False  # jittered, to spread
    delta_ks = [k for k in range(nk) if kernels[k].mass.size == 1]
    spread_ks = [k for k in range(nk) if kernels[k].mass.size > 1]
    for i in range(n):
        up = not down[i] and i >= crashed_until
        if bucket is not None:
            bucket.refill()
        in_service = live_served + waste  # (the gauge: its mean over the step, below)
        out.waiting[i] = waiting
        out.queue_depth[i] = queue
        out.delayed[i] = sleeping
        out.downstream_up[i] = up
        failed = doomed[i]  # accumulates this step's failures, by class
        any_failed = doomed_any[i]
        cohort = 0.0  # of them, failed together at one instant (no randomness in timing)
        if fail_all[i]:
            cohort = float(mix.sum())
            failed += mix
            any_failed = True
            mix[:] = 0.0
            live_served = waste = abandoned = waiting = in_window = 0.0
            room = [0.0] * ring_size
            window = [0.0] * w_steps
            head = i
        # the calls served in this step
        share = served_share[i]
        live = live_served + waiting
        first_ok = 0.0
        if live_served > TINY:
            done = live_served * share
            live_served -= done
            err = error_rate[i]
            first_ok = done * float(mix[0]) / live * (1.0 - err)
            if poison and not err:  # the served poison calls fail (fewer vector ops)
                part = mix * (done / live)
                good = float(part @ plain_classes)
                failed += part * poison_classes
                mix -= part
                any_failed = True
            elif err or poison:  # some of the served calls fail
                part = mix * (done / live)
                mix -= part
                good = float(part[:classes].sum()) * (1.0 - err)
                failed[:classes] += part[:classes] * err
                failed[classes:] += part[classes:]
                any_failed = True
                out.errors[i] = done * err
            else:
                mix *= 1.0 - done / live
                good = done
            out.success[i] = good
            busy -= good
        if waste > TINY:
            gone = waste * share
            waste -= gone
            out.wasted[i] = gone
        out.in_flight[i] = (in_service + live_served + waste) / 2
        # the room's head into the free slots
        free = slots - live_served - waste
        if free > TINY and abandoned + waiting > TINY:
            moved = min(free, abandoned)
            abandoned -= moved
            waste += moved
            want = take = min(free - moved, waiting)
            age = i - head
            while take > TINY and head < i:
                j = head % ring_size
                got = min(room[j], take)
                room[j] -= got
                take -= got
                if room[j] <= TINY:
                    room[j] = 0.0
                    head += 1
            served = want - take
            waiting -= served
            live_served += served
            left = (t_steps - age) * dt
            lost = math.exp(-left / (mean * slow[i])) if left > 0 else 1.0
            if lost > 1e-6 and served > TINY:  # served past the client's deadline
                cut = served * lost
                part = mix * (cut / (live_served + waiting))
                mix -= part
                deadline = max(i + 1, i - age + t_steps)
                doomed[deadline] += part
                doomed_any[deadline] = True
                live_served -= cut
                waste += cut
        # the calls whose wait reached the timeout
        expired = i - t_steps
        if expired >= 0 and expired >= head:
            j = expired % ring_size
            gone = room[j]
            if gone > TINY:
                part = mix * (gone / (live_served + waiting))
                mix -= part
                failed += part
                any_failed = True
                # a wait of exactly the timeout keeps the timing its calls arrived with
                came = out.attempts[expired]
                cohort += gone * (1.0 - out.randomised[expired] / came) if came > TINY \
                    else 0.0
                waiting -= gone
                out.timeouts[i] = gone
                if keep_abandoned:
                    abandoned += gone
            room[j] = 0.0
            head = expired + 1
        # the step's arrivals: first tries as workers free up, and retries landing now
        if breaker is not None:  # a probe: served now, or after the room's wait
            free = slots - live_served - waste > TINY
            blocked = breaker.blocked(i, up and not blackhole[i] and (
                free or (abandoned + waiting if keep_abandoned else waiting) < room_limit),
                0.0 if free else waiting * mean * slow[i] / slots)
        else:
            blocked = False
        if blocked:  # while it is open no worker takes a job (the brief's rule)
            new = 0.0
            out.breaker_open[i] = 1.0
        else:
            new = jobs[i] + queue if workers is None else min(workers - busy, queue + jobs[i])
            new = max(new, 0.0)
        # a worker a success frees takes a waiting job and calls in the same instant: the
        # place its call left is its own (the retries landing meanwhile found none)
        prompt = 0.0 if workers is None else min(out.success[i], new, queue)
        queue = 0.0 if workers is None else queue + jobs[i] - new
        busy += new
        landing = retries[:, i]
        landing[0] += new * (1.0 - poison)
        landing[classes] += new * poison
        due = float(landing_total[i])
        total = due + new
        sleeping -= due
        randomised = float(retries_random[i]) + (new if random_tries else 0.0)
        if breaker is not None:  # an open breaker holds the calls; closing lets them go
            if blocked:
                held_calls += landing
                held_count += total
                out.short_circuited[i] = total
                landing[:] = 0.0
                total = randomised = 0.0
                if breaker.probing and held_count > TINY:  # half-open: its probes go
                    total = min(float(breaker.probing), held_count)
                    landing += held_calls * (total / held_count)
                    held_calls *= 1.0 - total / held_count
                    held_count -= total
            elif held_count > TINY:
                landing += held_calls
                total += held_count
                held_calls[:] = 0.0
                held_count = 0.0
        out.attempts[i] = total
        out.randomised[i] = randomised
        if total > TINY:
            if not up:
                out.rejected[i] = total
                failed += landing
                any_failed = True
                cohort += total - randomised
            elif blackhole[i]:
                doomed[i + t_steps] += landing
                doomed_any[i + t_steps] = True
            else:
                let = total if bucket is None else bucket.take(total, randomised)
                if total - let > TINY:  # the rate limit refuses the rest
                    throttled = total - let
                    part = landing * (throttled / total)
                    failed += part
                    any_failed = True
                    if hint_kernels:
                        hinted += part
                        any_hinted = True
                    cohort += throttled * (1.0 - randomised / total)
                    out.rejected[i] = throttled
                    landing = landing * (let / total)
                    randomised *= let / total
                    total = let
                in_window += total - window[i % w_steps]
                window[i % w_steps] = total
                out.collapse_load[i] = in_window
                if in_window > threshold or \
                        live_served + waste + waiting + total >= load_limit:
                    if breaker is not None:  # the calls after the crash fail, and trip it
                        kept = held_back(total, in_window, threshold,
                                   load_limit - live_served - waste - waiting, breaker)
                        if kept > TINY:
                            held_calls += landing * (kept / total)
                            landing = landing * (1.0 - kept / total)
                            held_count += kept
                            out.short_circuited[i] += kept
                            randomised *= 1.0 - kept / total
                            total -= kept
                            out.attempts[i] = total
                            out.randomised[i] = randomised
                    out.crashes[i] = 1.0
                    crashed_until = i + max(restart, 1)
                    out.rejected[i] = total
                    cohort += total - randomised + float(mix.sum())
                    failed += landing + mix
                    any_failed = True
                    mix[:] = 0.0
                    live_served = waste = abandoned = waiting = in_window = 0.0
                    room = [0.0] * ring_size
                    window = [0.0] * w_steps
                    head = i + 1
                else:
                    into = min(total, max(slots - live_served - waste, 0.0))
                    occupied = abandoned + waiting if keep_abandoned else waiting
                    queued = min(total - into, max(room_limit - occupied, 0.0))
                    refused = total - into - queued
                    if refused <= 0.0:
                        mix += landing
                    else:  # the prompt first tries get in, the rest share what is left
                        first = min(prompt, into + queued, float(landing[0] + landing[
                            classes]))
                        share = (into + queued - first) / (total - first)
                        kept = landing * share
                        if first > TINY:
                            kept[0] += first * (1.0 - poison) * (1.0 - share)
                            kept[classes] += first * poison * (1.0 - share)
                        mix += kept
                    if refused > TINY:
                        part = landing - kept
                        failed += part
                        any_failed = True
                        if hint_kernels:
                            hinted += part
                            any_hinted = True
                        cohort += refused * (1.0 - randomised / total)
                        out.rejected[i] += refused
                    live_served += into
                    if queued > TINY:
                        room[i % ring_size] += queued
                        waiting += queued
        elif up:
            in_window -= window[i % w_steps]
            window[i % w_steps] = 0.0
        # failures: the next retry after its sleep, or the dead-letter queue
        if breaker is not None:
            breaker.heard(i, total, float(failed.sum()))
        if gate is not None:  # the budget: hears the step, limits its retries
            counts = failed.tolist() if any_failed else [0.0] * len(failed)
            wanted = sum(counts[:nk]) + (sum(counts[classes:classes + nk])
                                         if poison_retries else 0.0)
            allowed = gate.allow(wanted, min(out.timeouts[i], wanted))
            if wanted - allowed > TINY:
                cut = allowed / wanted
                refused = wanted - allowed
                failed[:nk] *= cut
                hinted[:nk] *= cut
                if poison_retries:
                    failed[classes:classes + nk] *= cut
                    hinted[classes:classes + nk] *= cut
                out.budget_refused[i] = refused
                out.failed_dlq[i] += refused
                busy -= refused
            gate.heard(new, first_ok, out.success[i] - first_ok, sum(counts))
        if any_failed:
            counts = failed.tolist()
            # what keeps random timing: all but the cohorts (a delay keeps a draw a draw)
            random_share = 1.0 - min(cohort / max(sum(counts), TINY), 1.0)
            if any_hinted:  # after a hint: the hint's sleep (use: exactly it)
                told = hinted.tolist()
                for k in range(nk):
                    plain, bad = told[k], told[classes + k] if poison_retries else 0.0
                    if plain + bad <= TINY:
                        continue
                    counts[k] -= plain
                    counts[classes + k] -= bad
                    mass = hint_kernels[k].mass
                    lo = i + hint_kernels[k].offset
                    hi = lo + mass.size
                    retries[k + 1, lo:hi] += plain * mass
                    retries[classes + k + 1, lo:hi] += bad * mass
                    retries_total[lo:hi] += (plain + bad) * mass
                    retries_random[lo:hi] += (plain + bad) * random_share * mass
                    out.retry[i] += plain + bad
                    sleeping += plain + bad
                hinted[:] = 0.0
                any_hinted = False
            for k in delta_ks:  # a delta: lands in one step
                plain, bad = counts[k], counts[classes + k] if poison_retries else 0.0
                amount = plain + bad
                lo = i + kernels[k].offset
                retries[k + 1, lo] += plain
                retries[classes + k + 1, lo] += bad
                retries_total[lo] += amount
                retries_random[lo] += amount * random_share
            for k in spread_ks:  # spread: gathered over a few steps, then spread at once
                held_plain[k] += counts[k]
                if poison_retries:
                    held_bad[k] += counts[classes + k]
                held = True
            amount = sum(counts[:nk]) + (sum(counts[classes:classes + nk])
                                         if poison_retries else 0.0)
            out.retry[i] += amount
            sleeping += amount
            dead = counts[nk] + counts[classes + nk] + \
                (0.0 if poison_retries else sum(counts[classes:classes + nk]))
            out.failed_dlq[i] += dead
            busy -= dead
        if held and i % GATHER == GATHER - 1:
            for k in range(nk):
                plain, bad = held_plain[k], held_bad[k]
                if plain + bad <= TINY:
                    continue
                mass = kernels[k].mass
                lo = i + kernels[k].offset
                hi = lo + mass.size
                spread = (plain + bad) * mass
                if not bad:
                    retries[k + 1, lo:hi] += spread
                elif not plain:  # (poison: only its own calls fail)
                    retries[classes + k + 1, lo:hi] += spread
                else:
                    retries[k + 1, lo:hi] += plain * mass
                    retries[classes + k + 1, lo:hi] += bad * mass
                retries_total[lo:hi] += spread
                retries_random[lo:hi] += spread
                held_plain[k] = held_bad[k] = 0.0
            held = False
    return Flows(*(np.asarray(values, dtype=float) for values in vars(out).values()))


def held_back(total: float, in_window: float, threshold: float, room: float, breaker) -> float:
    """Of *total* calls arriving together that crash the downstream, those a closed
    breaker holds back: the calls before the crash (the threshold less the window's
    earlier calls, or the load the limit had *room* for) get in, the next fail at once,
    and once it has heard enough failures to trip (``trips_after``) it holds the rest."""
    before = math.inf
    if in_window > threshold:
        before = threshold - (in_window - total)
    if room <= total:
        before = min(before, room)
    return max(total - max(before, 0.0) - breaker.trips_after(), 0.0)

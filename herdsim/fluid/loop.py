"""The fluid model's step loop, compiled (numba, cached on disk): the state and the rules of
:mod:`herdsim.fluid.integrate`'s docstring, over flat arrays. Its cost is the number of
steps (tens of nanoseconds each), not the population.

Every input is a number or an array (``integrate`` lays them out); the gates are the
members' compiled rules over their own parameter and state arrays
(:mod:`herdsim.policies.fluid_gate`), called only when the scenario has them. The output
is one row per series of :class:`~herdsim.fluid.integrate.Flows`, in its fields' order.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit

from herdsim.fluid import bucket
from herdsim.policies.breaker_fluid import (
    PROBING,
    breaker_blocked,
    breaker_heard,
    breaker_trips_after,
)
from herdsim.policies.budgets import fluid as budgets

TINY = 1e-9  # an amount below this is nothing
GATHER = 5  # steps whose failures into a jittered sleep are spread together: each lands
# up to 4 steps (8 ms) late, a shift far below a jitter's width, for a fifth of the work
SERIES = 19
(ATTEMPTS, RANDOMISED, SUCCESS, RETRY, FAILED_DLQ, REJECTED, TIMEOUTS, ERRORS, WASTED,
 CRASHES, IN_FLIGHT, WAITING, QUEUE_DEPTH, DELAYED, DOWNSTREAM_UP, COLLAPSE_LOAD,
 BUDGET_REFUSED, SHORT_CIRCUITED, BREAKER_OPEN) = range(SERIES)


@njit(cache=True)
def _spread(retries, retries_total, retries_random, row_plain, row_bad, lo, mass, plain,
            bad, random_share):  # pragma: no cover - compiled
    """Put *plain* and *bad* calls on their rows from step *lo* by *mass*."""
    for c in range(mass.size):
        retries[row_plain, lo + c] += plain * mass[c]
        retries[row_bad, lo + c] += bad * mass[c]
        retries_total[lo + c] += (plain + bad) * mass[c]
        retries_random[lo + c] += (plain + bad) * random_share * mass[c]


def _run(n, dt, nk, k_offset, k_start, k_size, k_mass, h_offset, h_start, h_size, h_mass,
        has_workers, workers, backlog, slots, room_limit, t_steps, keep_abandoned, mean,
        served_share, slow, threshold, load_limit, w_steps, restart, poison,
        poison_retries, random_tries, has_bucket, b_cells, b_meta, b_edges, down,
        fail_all, blackhole,
        error_rate, jobs, has_budget, budget_params, budget_state, has_breaker,
        breaker_params, breaker_state):  # noqa: C901, PLR0912, PLR0913, PLR0915  # pragma: no cover
    """The loop (see the module docstring): returns the series, ``(SERIES, n)``."""
    classes = nk + 1  # retry number 0..nk; poison calls in a second block
    has_hint = h_offset.size > 0
    span = 1
    for k in range(nk):
        span = max(span, k_offset[k] + k_size[k])
    retries = np.zeros((2 * classes, n + span + 1))
    retries_total = np.zeros(n + span + 1)
    retries_random = np.zeros(n + span + 1)
    doomed = np.zeros((n + t_steps + 2, 2 * classes))  # client failures to come
    doomed_any = np.zeros(n + t_steps + 2, dtype=np.bool_)
    ring_size = t_steps + 2
    room = np.zeros(ring_size)
    window = np.zeros(w_steps)
    out = np.zeros((SERIES, n))
    hinted = np.zeros(2 * classes)  # this step's failures that heard Retry-After
    any_hinted = False
    held_calls = np.zeros(2 * classes)  # calls an open breaker holds, by class
    held_count = 0.0  # (let go together: a cohort, whatever timing they came with)
    first_ok = 0.0  # first tries served this step (for the budget)
    mix = np.zeros(2 * classes)  # the live calls in the downstream, by class
    queue = backlog
    busy = live_served = waste = abandoned = waiting = 0.0
    sleeping = in_window = 0.0
    head = 0
    crashed_until = -1
    held_plain = np.zeros(nk)
    held_bad = np.zeros(nk)
    held = False
    counts = np.zeros(2 * classes)
    for i in range(n):
        up = not down[i] and i >= crashed_until
        if has_bucket:
            bucket.refill(b_cells, b_meta)
        in_service = live_served + waste  # (the gauge: its mean over the step, below)
        out[WAITING, i] = waiting
        out[QUEUE_DEPTH, i] = queue
        out[DELAYED, i] = sleeping
        out[DOWNSTREAM_UP, i] = up
        failed = doomed[i]  # accumulates this step's failures, by class (a view)
        any_failed = doomed_any[i]
        cohort = 0.0  # of them, failed together at one instant (no randomness in timing)
        if fail_all[i]:
            cohort = mix.sum()
            failed += mix
            any_failed = True
            mix[:] = 0.0
            live_served = waste = abandoned = waiting = in_window = 0.0
            room[:] = 0.0
            window[:] = 0.0
            head = i
        # the calls served in this step
        share = served_share[i]
        live = live_served + waiting
        first_ok = 0.0
        if live_served > TINY:
            done = live_served * share
            live_served -= done
            err = error_rate[i]
            first_ok = done * mix[0] / live * (1.0 - err)
            if poison and not err:  # the served poison calls fail
                good = 0.0
                for c in range(2 * classes):
                    part = mix[c] * (done / live)
                    if c < classes:
                        good += part
                    else:
                        failed[c] += part
                    mix[c] -= part
                any_failed = True
            elif err or poison:  # some of the served calls fail
                good = 0.0
                for c in range(2 * classes):
                    part = mix[c] * (done / live)
                    mix[c] -= part
                    if c < classes:
                        good += part
                        failed[c] += part * err
                    else:
                        failed[c] += part
                good *= 1.0 - err
                any_failed = True
                out[ERRORS, i] = done * err
            else:
                mix *= 1.0 - done / live
                good = done
            out[SUCCESS, i] = good
            busy -= good
        if waste > TINY:
            gone = waste * share
            waste -= gone
            out[WASTED, i] = gone
        out[IN_FLIGHT, i] = (in_service + live_served + waste) / 2
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
                deadline = max(i + 1, i - age + t_steps)
                scale = cut / (live_served + waiting)
                for c in range(2 * classes):
                    part = mix[c] * scale
                    mix[c] -= part
                    doomed[deadline, c] += part
                doomed_any[deadline] = True
                live_served -= cut
                waste += cut
        # the calls whose wait reached the timeout
        expired = i - t_steps
        if expired >= 0 and expired >= head:
            j = expired % ring_size
            gone = room[j]
            if gone > TINY:
                scale = gone / (live_served + waiting)
                for c in range(2 * classes):
                    part = mix[c] * scale
                    mix[c] -= part
                    failed[c] += part
                any_failed = True
                # a wait of exactly the timeout keeps the timing its calls arrived with
                came = out[ATTEMPTS, expired]
                cohort += gone * (1.0 - out[RANDOMISED, expired] / came) if came > TINY \
                    else 0.0
                waiting -= gone
                out[TIMEOUTS, i] = gone
                if keep_abandoned:
                    abandoned += gone
            room[j] = 0.0
            head = expired + 1
        # the step's arrivals: first tries as workers free up, and retries landing now
        blocked = False
        if has_breaker:  # a probe: served now, or after the room's wait
            free = slots - live_served - waste > TINY
            occupied = abandoned + waiting if keep_abandoned else waiting
            blocked = breaker_blocked(
                breaker_params, breaker_state, i,
                up and not blackhole[i] and (free or occupied < room_limit),
                0.0 if free else waiting * mean * slow[i] / slots)
        if blocked:  # while it is open no worker takes a job (the brief's rule)
            new = 0.0
            out[BREAKER_OPEN, i] = 1.0
        else:
            new = jobs[i] + queue if not has_workers else \
                min(workers - busy, queue + jobs[i])
            new = max(new, 0.0)
        # a worker a success frees takes a waiting job and calls in the same instant: the
        # place its call left is its own (the retries landing meanwhile found none)
        prompt = 0.0 if not has_workers else min(out[SUCCESS, i], new, queue)
        queue = 0.0 if not has_workers else queue + jobs[i] - new
        busy += new
        landing = retries[:, i].copy()
        landing[0] += new * (1.0 - poison)
        landing[classes] += new * poison
        due = retries_total[i]
        total = due + new
        sleeping -= due
        randomised = retries_random[i] + (new if random_tries else 0.0)
        if has_breaker:  # an open breaker holds the calls; closing lets them go
            if blocked:
                held_calls += landing
                held_count += total
                out[SHORT_CIRCUITED, i] = total
                landing[:] = 0.0
                total = randomised = 0.0
                probing = breaker_state[PROBING]
                if probing and held_count > TINY:  # half-open: its probes go
                    total = min(probing, held_count)
                    landing += held_calls * (total / held_count)
                    held_calls *= 1.0 - total / held_count
                    held_count -= total
            elif held_count > TINY:
                landing += held_calls
                total += held_count
                held_calls[:] = 0.0
                held_count = 0.0
        out[ATTEMPTS, i] = total
        out[RANDOMISED, i] = randomised
        if total > TINY:
            if not up:
                out[REJECTED, i] = total
                failed += landing
                any_failed = True
                cohort += total - randomised
            elif blackhole[i]:
                doomed[i + t_steps] += landing
                doomed_any[i + t_steps] = True
            else:
                let = total if not has_bucket else \
                    bucket.take(b_cells, b_meta, b_edges, total, randomised)
                if total - let > TINY:  # the rate limit refuses the rest
                    throttled = total - let
                    part_of = throttled / total
                    kept = let / total
                    for c in range(2 * classes):
                        part = landing[c] * part_of
                        failed[c] += part
                        if has_hint:
                            hinted[c] += part
                        landing[c] = landing[c] * kept
                    any_failed = True
                    if has_hint:
                        any_hinted = True
                    cohort += throttled * (1.0 - randomised / total)
                    out[REJECTED, i] = throttled
                    randomised *= kept
                    total = let
                in_window += total - window[i % w_steps]
                window[i % w_steps] = total
                out[COLLAPSE_LOAD, i] = in_window
                if in_window > threshold or \
                        live_served + waste + waiting + total >= load_limit:
                    if has_breaker:  # the calls after the crash fail, and trip it
                        holding = held_back(
                            total, in_window, threshold,
                            load_limit - live_served - waste - waiting,
                            breaker_trips_after(breaker_params, breaker_state))
                        if holding > TINY:
                            held_calls += landing * (holding / total)
                            landing = landing * (1.0 - holding / total)
                            held_count += holding
                            out[SHORT_CIRCUITED, i] += holding
                            randomised *= 1.0 - holding / total
                            total -= holding
                            out[ATTEMPTS, i] = total
                            out[RANDOMISED, i] = randomised
                    out[CRASHES, i] = 1.0
                    crashed_until = i + max(restart, 1)
                    out[REJECTED, i] = total
                    cohort += total - randomised + mix.sum()
                    failed += landing + mix
                    any_failed = True
                    mix[:] = 0.0
                    live_served = waste = abandoned = waiting = in_window = 0.0
                    room[:] = 0.0
                    window[:] = 0.0
                    head = i + 1
                else:
                    into = min(total, max(slots - live_served - waste, 0.0))
                    occupied = abandoned + waiting if keep_abandoned else waiting
                    queued = min(total - into, max(room_limit - occupied, 0.0))
                    refused = total - into - queued
                    if refused <= 0.0:
                        mix += landing
                        entered = landing
                    else:  # the prompt first tries get in, the rest share what is left
                        first = min(prompt, into + queued, landing[0] + landing[classes])
                        share = (into + queued - first) / (total - first)
                        entered = landing * share
                        if first > TINY:
                            entered[0] += first * (1.0 - poison) * (1.0 - share)
                            entered[classes] += first * poison * (1.0 - share)
                        mix += entered
                    if refused > TINY:
                        for c in range(2 * classes):
                            part = landing[c] - entered[c]
                            failed[c] += part
                            if has_hint:
                                hinted[c] += part
                        any_failed = True
                        if has_hint:
                            any_hinted = True
                        cohort += refused * (1.0 - randomised / total)
                        out[REJECTED, i] += refused
                    live_served += into
                    if queued > TINY:
                        room[i % ring_size] += queued
                        waiting += queued
        elif up:
            in_window -= window[i % w_steps]
            window[i % w_steps] = 0.0
        # failures: the next retry after its sleep, or the dead-letter queue
        if has_breaker:
            breaker_heard(breaker_params, breaker_state, i, total, failed.sum())
        if has_budget:  # the budget: hears the step, limits its retries
            if any_failed:
                counts[:] = failed
            else:
                counts[:] = 0.0
            wanted = counts[:nk].sum() + (counts[classes:classes + nk].sum()
                                          if poison_retries else 0.0)
            allowed = budgets.allow(budget_params, budget_state, wanted,
                                   min(out[TIMEOUTS, i], wanted))
            if wanted - allowed > TINY:
                cut = allowed / wanted
                refused = wanted - allowed
                failed[:nk] *= cut
                hinted[:nk] *= cut
                if poison_retries:
                    failed[classes:classes + nk] *= cut
                    hinted[classes:classes + nk] *= cut
                out[BUDGET_REFUSED, i] = refused
                out[FAILED_DLQ, i] += refused
                busy -= refused
            budgets.heard(budget_params, budget_state, new, first_ok,
                         out[SUCCESS, i] - first_ok, counts.sum())
        if any_failed:
            counts[:] = failed
            # what keeps random timing: all but the cohorts (a delay keeps a draw a draw)
            random_share = 1.0 - min(cohort / max(counts.sum(), TINY), 1.0)
            if any_hinted:  # after a hint: the hint's sleep (use: exactly it)
                for k in range(nk):
                    plain = hinted[k]
                    bad = hinted[classes + k] if poison_retries else 0.0
                    if plain + bad <= TINY:
                        continue
                    counts[k] -= plain
                    counts[classes + k] -= bad
                    mass = h_mass[h_start[k]:h_start[k] + h_size[k]]
                    _spread(retries, retries_total, retries_random, k + 1, classes + k + 1,
                            i + h_offset[k], mass, plain, bad, random_share)
                    out[RETRY, i] += plain + bad
                    sleeping += plain + bad
                hinted[:] = 0.0
                any_hinted = False
            for k in range(nk):
                if k_size[k] != 1:
                    continue
                plain = counts[k]
                bad = counts[classes + k] if poison_retries else 0.0
                amount = plain + bad
                lo = i + k_offset[k]
                retries[k + 1, lo] += plain
                retries[classes + k + 1, lo] += bad
                retries_total[lo] += amount
                retries_random[lo] += amount * random_share
            for k in range(nk):  # spread: gathered over a few steps, then spread at once
                if k_size[k] == 1:
                    continue
                held_plain[k] += counts[k]
                if poison_retries:
                    held_bad[k] += counts[classes + k]
                held = True
            amount = counts[:nk].sum() + (counts[classes:classes + nk].sum()
                                          if poison_retries else 0.0)
            out[RETRY, i] += amount
            sleeping += amount
            dead = counts[nk] + counts[classes + nk] + \
                (0.0 if poison_retries else counts[classes:classes + nk].sum())
            out[FAILED_DLQ, i] += dead
            busy -= dead
        if held and i % GATHER == GATHER - 1:
            for k in range(nk):
                plain = held_plain[k]
                bad = held_bad[k]
                if plain + bad <= TINY:
                    continue
                mass = k_mass[k_start[k]:k_start[k] + k_size[k]]
                _spread(retries, retries_total, retries_random, k + 1, classes + k + 1,
                        i + k_offset[k], mass, plain, bad, 1.0)
                held_plain[k] = 0.0
                held_bad[k] = 0.0
            held = False
    return out


run: Callable[..., np.ndarray] = njit(cache=True)(_run)


@njit(cache=True)
def held_back(total, in_window, threshold, room, trips_after):  # pragma: no cover
    """Of *total* calls arriving together that crash the downstream, those a closed
    breaker holds back: the calls before the crash (the threshold less the window's
    earlier calls, or the load the limit had *room* for) get in, the next fail at once,
    and once it has heard *trips_after* failures (enough to trip) it holds the rest."""
    before = math.inf
    if in_window > threshold:
        before = threshold - (in_window - total)
    if room <= total:
        before = min(before, room)
    return max(total - max(before, 0.0) - trips_after, 0.0)  # compiled once, cached on disk

"""The floor: W1 and W2 as a bare pure-Python event loop on ``heapq``, and herdsim against it.

    python benchmarks/floor.py              # best of 3 by CPU time
    python benchmarks/floor.py --repeat 5

No simulation library, no process objects, no recording beyond each call's wait: an event
is a tuple on a heap, and the loop dispatches on its kind. It is what a call costs in
Python with nothing in the way, so herdsim's calls per CPU second over the floor's says
how much of its per-call cost is the engine's own. Both loops simulate their workload
exactly (``workloads.py``) and their waits and retries pass the same checks as every model
of ``peers.py``.
"""

from __future__ import annotations

import argparse
import heapq
import random
import time
from collections import deque

import workloads as wl

ARRIVE, RETRY, DEPART, DOWN, UP = range(5)


def floor_w1(seed: int) -> dict:
    """M/M/c: arrivals and departures on one heap, a deque of waiting arrival times."""
    rng = random.Random(seed)
    expo = rng.expovariate
    lam, mu, c, end = wl.LAMBDA, wl.MU, wl.C, wl.DURATION
    heap = [(expo(lam), ARRIVE)]
    push, pop = heapq.heappush, heapq.heappop
    waiting: deque[float] = deque()
    starts, waits = [], []
    busy = calls = 0
    while heap:
        now, kind = heap[0]
        if now >= end:
            break
        pop(heap)
        if kind == ARRIVE:
            calls += 1
            push(heap, (now + expo(lam), ARRIVE))
            if busy < c:
                busy += 1
                starts.append(now)
                waits.append(0.0)
                push(heap, (now + expo(mu), DEPART))
            else:
                waiting.append(now)
        elif waiting:  # a departure: the head of the line takes the server
            came = waiting.popleft()
            starts.append(came)
            waits.append(now - came)
            push(heap, (now + expo(mu), DEPART))
        else:
            busy -= 1
    return {"calls": calls, "retries": 0, "dead_lettered": 0,
            "wait_batches": wl.batch_waits(starts, waits, wl.check_window("W1"))}


def floor_w2(seed: int) -> dict:
    """M/M/c with the outage: a call is ``[retries]``; departures carry the epoch they were
    scheduled in, and the outage's start bumps it, so the calls it failed never depart."""
    rng = random.Random(seed)
    expo = rng.expovariate
    lam, mu, c, end = wl.LAMBDA, wl.MU, wl.C, wl.DURATION
    start, length = wl.OUTAGE
    push, pop = heapq.heappush, heapq.heappop
    seq = 0  # ties: events at one instant run in the order they were scheduled
    heap = [(expo(lam), -3, ARRIVE, None, 0), (start, -2, DOWN, None, 0),
            (start + length, -1, UP, None, 0)]
    heapq.heapify(heap)
    waiting: deque = deque()  # (time it came, call)
    serving: dict[int, list] = {}  # id -> call, in service now
    starts, waits = [], []
    busy = calls = retries = dead = epoch = 0
    down = False

    def fail(now, call):
        nonlocal seq, retries, dead
        if call[0] == wl.MAX_RETRIES:
            dead += 1
            return
        call[0] += 1
        retries += 1
        seq += 1
        push(heap, (now + wl.backoff(call[0]), seq, RETRY, call, 0))

    while heap:
        now, _, kind, call, ep = heap[0]
        if now >= end:
            break
        pop(heap)
        if kind <= RETRY:  # ARRIVE, RETRY
            if kind == ARRIVE:
                seq += 1
                push(heap, (now + expo(lam), seq, ARRIVE, None, 0))
                call = [0]
            calls += 1
            if down:
                fail(now, call)
            elif busy < c:
                busy += 1
                starts.append(now)
                waits.append(0.0)
                serving[id(call)] = call
                seq += 1
                push(heap, (now + expo(mu), seq, DEPART, call, epoch))
            else:
                waiting.append((now, call))
        elif kind == DEPART:
            if ep != epoch:
                continue  # failed by the outage
            del serving[id(call)]
            if waiting:
                came, nxt = waiting.popleft()
                starts.append(came)
                waits.append(now - came)
                serving[id(nxt)] = nxt
                seq += 1
                push(heap, (now + expo(mu), seq, DEPART, nxt, epoch))
            else:
                busy -= 1
        elif kind == DOWN:  # every call in service or waiting fails now
            down, epoch = True, epoch + 1
            failed = [*serving.values(), *(c_ for _, c_ in waiting)]
            serving.clear()
            waiting.clear()
            busy = 0
            for c_ in failed:
                fail(now, c_)
        else:
            down = False
    return {"calls": calls, "retries": retries, "dead_lettered": dead,
            "wait_batches": wl.batch_waits(starts, waits, wl.check_window("W2"))}


FLOORS = {"W1": floor_w1, "W2": floor_w2}


def timed(fn, *args) -> dict:
    """Run ``fn(*args)``; its result with the CPU seconds it took."""
    cpu = time.process_time()
    result = fn(*args)
    return {**result, "cpu": time.process_time() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N by CPU time")
    parser.add_argument("--no-herdsim", action="store_true", help="time the floor only")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    from peers import herdsim_model  # the same herdsim run peers.py times

    print(f"best of {args.repeat} by CPU time; Erlang C Wq {wl.wq_theory() * 1e3:.4f} ms")
    print(f"{'workload':8} {'model':8} {'calls':>9} {'CPU s':>7} {'calls/CPU s':>12} "
          f"{'Wq ms [99.9% CI]':>26}  check")
    for workload, floor in FLOORS.items():
        runs: dict[str, list[dict]] = {"floor": [], "herdsim": []}
        for _ in range(args.repeat):  # interleaved: a busy spell hits both
            runs["floor"].append(timed(floor, wl.SEED))
            if not args.no_herdsim:
                runs["herdsim"].append(herdsim_model(workload))
        best = {name: min(r, key=lambda x: x["cpu"]) for name, r in runs.items() if r}
        for name, r in best.items():
            wait, problems = wl.check(workload, r)
            print(f"{workload:8} {name:8} {r['calls']:>9,} {r['cpu']:>7.2f} "
                  f"{r['calls'] / r['cpu']:>12,.0f} {wait:>26}  "
                  f"{'; '.join(problems) or 'ok'}")
        if "herdsim" in best:
            ours, base = best["herdsim"], best["floor"]
            ratio = (base["calls"] / base["cpu"]) / (ours["calls"] / ours["cpu"])
            print(f"{workload}: the floor runs {ratio:.1f}x herdsim's calls per CPU second")


if __name__ == "__main__":
    main()

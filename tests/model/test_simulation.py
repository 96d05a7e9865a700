"""The fast engine against a plain SimPy reference model of the same physics.

Why a reference model: the engine's speed comes from short cuts (an idle worker waiting on
the next arrival's timer, calls that fail fast without an event, an inlined run loop).
The engine as it was before them is not installed in CI, so the test keeps the physics in
the most literal SimPy it can be written in (``simpy.Store`` for the main queue,
``simpy.Resource`` for the slots, a process per call, ``Interrupt`` for the calls failed
at t0) and compares KPI distributions over replications. The two models share no random
numbers, so agreement is statistical, not exact. Byte identity with the previous engine
is checked outside CI by ``benchmarks/identity.py``.

Scenarios: a closed pool of 60 workers calling 20 slots x 50 ms (Poisson arrivals at
80% load, or bursts of 30 on a backlog of 200 at 75%), a ``down`` outage from 8 s to
10 s, full-jitter backoff, five retries, then the DLQ. KPIs: successes, dead letters,
downstream calls, mean latency of successes.

Tolerance: each KPI's 10 replication means per model must agree within ``Z`` = 4
standard errors of their difference (a correct engine fails that about once in 10^4
draws of seeds per KPI; the seeds are fixed, so the outcome is too). Measured when the
test was written: the engine and the reference differ by at most 0.43 standard errors,
while a downstream 5% slower (19 slots in the reference) moves the mean latency by 3.6
(Poisson) and 6.0 (bursts) standard errors.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import simpy

import herdsim

REPLICATIONS = 10
Z = 4.0

BASE = {
    "name": "equivalence", "duration": "20s", "bin": "100ms",
    "workload": {"arrivals": "poisson", "rate": 320},
    "workers": {"count": 60, "retry_mode": "sleep"},
    "downstream": {"concurrency": 20, "queue_limit": None, "timeout": None,
                   "service": {"distribution": "exponential", "mean": "50ms"},
                   "outages": [{"start": "8s", "duration": "2s", "mode": "down"}]},
    "retry": {"strategy": "full_jitter", "base": "100ms", "cap": "1s", "max_retries": 5},
}
BURSTS = {**BASE, "workload": {"arrivals": "burst", "rate": 300, "burst_size": 30,
                               "backlog": 200}}


def reference(sc: herdsim.Scenario, seed: int) -> dict[str, float]:
    """The same physics as the engine, written plainly in SimPy."""
    rng = random.Random(seed)
    env = simpy.Environment()
    jobs = simpy.Store(env)
    ds, retry, wl = sc.downstream, sc.retry, sc.workload
    slots = simpy.Resource(env, ds.concurrency)
    state = {"down": False}
    in_flight: set = set()
    out = {"succeeded": 0, "dead_lettered": 0, "attempts": 0, "latency": []}

    def producer():
        for _ in range(wl.backlog):
            jobs.put(0.0)
        burst = wl.burst_size if wl.arrivals == "burst" else 1
        while True:
            yield env.timeout(rng.expovariate(wl.rate) if wl.arrivals == "poisson"
                              else burst / wl.rate)
            for _ in range(burst):
                jobs.put(env.now)

    def call():
        try:
            with slots.request() as slot:
                yield slot
                yield env.timeout(rng.expovariate(1.0 / ds.service.mean))
            return True
        except simpy.Interrupt:  # failed together with every call in flight at t0
            return False

    def worker():
        while True:
            arrived = yield jobs.get()
            n = 0
            while True:
                out["attempts"] += 1
                ok = False
                if not state["down"]:
                    proc = env.process(call())
                    in_flight.add(proc)
                    ok = yield proc
                    in_flight.discard(proc)
                if ok:
                    out["succeeded"] += 1
                    out["latency"].append(env.now - arrived)
                    break
                if n >= retry.max_retries:
                    out["dead_lettered"] += 1
                    break
                yield env.timeout(rng.uniform(0.0, min(retry.cap, retry.base * 2**n)))
                n += 1

    def outage(o):
        yield env.timeout(o.start)
        state["down"] = True
        for proc in list(in_flight):
            proc.interrupt()
        yield env.timeout(o.duration)
        state["down"] = False

    env.process(producer())
    for o in ds.outages:
        env.process(outage(o))
    for _ in range(sc.workers.count):
        env.process(worker())
    env.run(until=sc.duration)
    return {"succeeded": out["succeeded"], "dead_lettered": out["dead_lettered"],
            "attempts": out["attempts"], "latency": float(np.mean(out["latency"]))}


def engine(sc: herdsim.Scenario, seed: int) -> dict[str, float]:
    res = herdsim.run(sc.model_copy(update={"seed": seed}))
    jobs = res.jobs
    done = jobs[jobs["outcome"] == "succeeded"]
    return {"succeeded": len(done), "dead_lettered": res.summary["jobs_dead_lettered"],
            "attempts": res.summary["attempts_total"], "latency": float(done["latency"].mean())}


@pytest.mark.parametrize("spec", [BASE, BURSTS], ids=["poisson", "bursts"])
@pytest.mark.slow
def test_engine_matches_the_reference_model(spec):
    sc = herdsim.load_scenario(spec)
    ours = [engine(sc, seed) for seed in range(1, REPLICATIONS + 1)]
    theirs = [reference(sc, 1000 + seed) for seed in range(1, REPLICATIONS + 1)]
    for kpi in ("succeeded", "dead_lettered", "attempts", "latency"):
        a = np.array([r[kpi] for r in ours], dtype=float)
        b = np.array([r[kpi] for r in theirs], dtype=float)
        se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        assert abs(a.mean() - b.mean()) <= Z * se + 1e-9 * abs(b.mean()), (
            f"{kpi}: engine {a.mean():.4g} vs reference {b.mean():.4g} (se {se:.3g})")

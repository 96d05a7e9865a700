"""herdsim against the simulators a user would write or pick, on the same systems.

    python benchmarks/peers.py                    # every workload and model, best of 3
    python benchmarks/peers.py --repeat 5 --workloads W1,W2 --models herdsim,simpy,ciw
    python benchmarks/peers.py --baseline /tmp/herdsim-base   # also an earlier herdsim

Workloads (``workloads.py``): W1, an M/M/100 queue (800/s, 10/s a server, 300 s); W2, W1
with a 10 s ``down`` outage and exponential backoff; and the outage story,
``scenarios/outage.yaml`` scaled to 10,000 workers as ``benchmarks/engine.py`` runs it.

Models, each the way its library's users would write it:

* ``herdsim``: the workload as a scenario dict through ``herdsim.run`` (recording on,
  frames and summary built; W1 and W2 as open-loop callers, each call its own caller).
  The clock starts once ``herdsim.run`` is imported (pandas with it): imports are not
  calls, and no other model's imports are timed either.
* ``baseline`` (with ``--baseline PATH``): the same, by the herdsim package found in PATH
  (put first on ``PYTHONPATH``), e.g. a release installed with ``pip install --target``.
* ``simpy``: plain SimPy, one process per customer and a ``simpy.Resource`` of 100
  servers; W2's outage interrupts the calls in flight. The story: a pool of worker
  processes, a ``simpy.Store`` and a ``simpy.Resource``.
* ``naive``: the story only, ``benchmarks/engine.py``'s naive model (a process per call).
* ``ciw``: a ciw network; W2 adds a backoff node, a service distribution that fails the
  calls the outage catches, and a router that sends failed calls to the backoff node.
* ``salabim``: components requesting a resource; W2's outage activates those in flight.
* ``floor``: ``floor.py``'s bare heapq loop.
* ``happysim`` needs Python 3.13 or later and has no model here yet: it is reported as
  skipped.

Every model runs in its own subprocess, N times (``--repeat``, interleaved so a busy spell
hits them all), and keeps its fastest run by process CPU time; the peak RSS is that
process's high-water mark, imports included. Each run's waits are checked against
Erlang C and W2's retries against theory (``workloads.check``); the story's calls and
retries are compared with herdsim's. A model that disagrees is flagged in the table.
Models whose library is not installed are skipped, saying so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import workloads as wl

HERE = Path(__file__).resolve().parent
STORY_WORKERS, STORY_DURATION = 10_000, "60s"
# The story's calls, retries and dead letters may differ from herdsim's by this fraction.
# The models draw different random numbers, and the herd's retries are set by the outage
# (every worker fails at its start): plain SimPy's differed from herdsim's by 0.1% (calls)
# and 0.03% (retries) at 60 s, 0.3% and 0.003% at 30 s, so 5% is noise x 15 or more and
# still catches a missing mechanism (in-flight calls not failed, no backoff cap, no DLQ).
STORY_TOLERANCE = 0.05


# -- herdsim ---------------------------------------------------------------------------------


def mm100_scenario(workload: str) -> dict:
    """W1 or W2 as a herdsim scenario: open-loop callers against 100 slots."""
    outage = wl.WORKLOADS[workload]["outage"]
    return {
        "name": workload.lower(), "seed": wl.SEED, "duration": wl.DURATION, "bin": 0.1,
        "workload": {"arrivals": "poisson", "rate": wl.LAMBDA},
        "workers": {"count": None},  # open loop: every arrival is its own caller
        "downstream": {
            "concurrency": wl.C,
            "service": {"distribution": "exponential", "mean": 1 / wl.MU},
            "outages": [] if outage is None else [
                {"start": outage[0], "duration": outage[1], "mode": "down"}],
        },
        "retry": {"strategy": "exponential", "base": wl.BASE, "cap": wl.CAP,
                  "max_retries": wl.MAX_RETRIES},
        "dlq": {"enabled": True},
    }


def herdsim_model(workload: str, scenario: dict | None = None) -> dict:
    """Run *workload* (or the story's *scenario*) with ``herdsim.run``, end to end.

    herdsim records no wait per call; the mean wait comes from its ``waiting`` gauge (the
    calls waiting for a slot, sampled at every bin start) by Little's law, Wq = Lq / lambda,
    one estimate a batch."""
    import herdsim

    sc = herdsim.load_scenario(scenario or mm100_scenario(workload))
    run = herdsim.run  # (imports what drawing frames needs: imports are not calls)
    cpu = time.process_time()
    result = run(sc)
    cpu = time.process_time() - cpu
    ts, jobs = result.timeseries, result.jobs
    until = wl.check_window(workload) if workload in wl.WORKLOADS else sc.duration
    batch = (ts["time"] // wl.BATCH).astype(int)
    keep = ts["time"] < until
    lq = ts["waiting"][keep].groupby(batch[keep]).mean()
    rate = ts["arrivals"][keep].groupby(batch[keep]).sum() / wl.BATCH
    return {"cpu": cpu, "calls": int(result.summary["attempts_total"]),
            "retries": len(result.sleeps),
            "dead_lettered": int((jobs["outcome"] == "dead_lettered").sum()),
            "wait_batches": list(lq / rate)}


# -- plain SimPy -----------------------------------------------------------------------------


def simpy_model(workload: str) -> dict:
    """One process per customer; ``simpy.Resource(env, 100)``; waits recorded per call."""
    import simpy

    rng = random.Random(wl.SEED)
    env = simpy.Environment()
    servers = simpy.Resource(env, capacity=wl.C)
    starts, waits = [], []
    count = {"calls": 0, "retries": 0, "dead": 0}

    def customer():
        count["calls"] += 1
        came = env.now
        with servers.request() as req:
            yield req
            starts.append(came)
            waits.append(env.now - came)
            yield env.timeout(rng.expovariate(wl.MU))

    outage = wl.WORKLOADS[workload]["outage"]
    in_flight: set = set()
    state = {"down": False}

    def retrying_customer():
        me = env.active_process
        retries = 0
        while True:
            count["calls"] += 1
            if not state["down"]:
                came = env.now
                in_flight.add(me)
                try:
                    with servers.request() as req:
                        yield req
                        starts.append(came)
                        waits.append(env.now - came)
                        yield env.timeout(rng.expovariate(wl.MU))
                    in_flight.discard(me)
                    return
                except simpy.Interrupt:
                    pass  # the outage failed the call (and emptied in_flight)
            if retries == wl.MAX_RETRIES:
                count["dead"] += 1
                return
            retries += 1
            count["retries"] += 1
            yield env.timeout(wl.backoff(retries))

    def down(start, length):
        yield env.timeout(start)
        state["down"] = True
        failed = list(in_flight)
        in_flight.clear()
        for proc in failed:
            proc.interrupt()
        yield env.timeout(length)
        state["down"] = False

    def source(make):
        while True:
            yield env.timeout(rng.expovariate(wl.LAMBDA))
            env.process(make())

    if outage is None:
        env.process(source(customer))
    else:
        env.process(source(retrying_customer))
        env.process(down(*outage))
    cpu = time.process_time()
    env.run(until=wl.DURATION)
    cpu = time.process_time() - cpu
    return {"cpu": cpu, "calls": count["calls"], "retries": count["retries"],
            "dead_lettered": count["dead"],
            "wait_batches": wl.batch_waits(starts, waits, wl.check_window(workload))}


# -- ciw -------------------------------------------------------------------------------------


def ciw_model(workload: str) -> dict:
    """A ciw network. W1: one node. W2: node 1 the servers, node 2 the backoff (infinite
    servers); the outage is the service distribution's (a call it catches ends at its
    start, or at once during it, marked failed) and a router's (failed calls to node 2)."""
    import ciw

    outage = wl.WORKLOADS[workload]["outage"]
    ciw.seed(wl.SEED)
    count = {"retries": 0, "dead": 0}
    if outage is None:
        network = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(rate=wl.LAMBDA)],
            service_distributions=[ciw.dists.Exponential(rate=wl.MU)],
            number_of_servers=[wl.C])
    else:
        start, end = outage[0], outage[0] + outage[1]

        class Service(ciw.dists.Distribution):
            """Exponential service, cut short by the outage: the call then fails."""

            def sample(self, t=None, ind=None):
                s = random.expovariate(wl.MU)
                ind.failed = start <= t < end or t < start < t + s
                if not ind.failed:
                    return s
                return max(0.0, start - t)

        class Backoff(ciw.dists.Distribution):
            def sample(self, t=None, ind=None):
                return wl.backoff(ind.retries)

        class AfterCall(ciw.routing.NodeRouting):
            """A failed call retries through node 2 (or is dead-lettered); others leave."""

            def next_node(self, ind):
                if not ind.failed:
                    return self.simulation.nodes[-1]
                ind.retries = getattr(ind, "retries", 0) + 1
                if ind.retries > wl.MAX_RETRIES:
                    count["dead"] += 1
                    return self.simulation.nodes[-1]
                count["retries"] += 1
                return self.simulation.nodes[2]

        network = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(rate=wl.LAMBDA), None],
            service_distributions=[Service(), Backoff()],
            number_of_servers=[wl.C, float("inf")],
            routing=ciw.routing.NetworkRouting(
                routers=[AfterCall(), ciw.routing.Direct(to=1)]))
    cpu = time.process_time()
    sim = ciw.Simulation(network)
    sim.simulate_until_max_time(wl.DURATION)
    cpu = time.process_time() - cpu
    records = [r for r in sim.get_all_records() if r.node == 1]
    window = wl.check_window(workload)
    served = [r for r in records if r.service_start_date < window]
    in_node = len(sim.nodes[1].all_individuals)  # calls made, not finished by the end
    return {"cpu": cpu, "calls": len(records) + in_node, "retries": count["retries"],
            "dead_lettered": count["dead"],
            "wait_batches": wl.batch_waits([r.arrival_date for r in served],
                                           [r.waiting_time for r in served], window)}


# -- salabim ---------------------------------------------------------------------------------


def salabim_model(workload: str) -> dict:
    """Customer components requesting a ``sim.Resource`` of 100 (generator style: the
    yieldless default needs greenlet); W2's outage activates every customer in service or
    waiting, which then sees its call failed."""
    import salabim as sim

    sim.yieldless(False)
    rng = random.Random(wl.SEED)
    env = sim.Environment(trace=False, random_seed="*")
    servers = sim.Resource("servers", capacity=wl.C, env=env)
    starts, waits = [], []
    count = {"calls": 0, "retries": 0, "dead": 0}
    outage = wl.WORKLOADS[workload]["outage"]
    state = {"down": False}

    class Customer(sim.Component):
        def process(self):
            count["calls"] += 1
            came = env.now()
            yield self.request(servers)
            starts.append(came)
            waits.append(env.now() - came)
            yield self.hold(rng.expovariate(wl.MU))
            self.release()

    class RetryingCustomer(sim.Component):
        def process(self):
            retries = 0
            while True:
                count["calls"] += 1
                if not state["down"]:
                    came = env.now()
                    self.failed = False
                    yield self.request(servers)
                    if not self.failed:
                        starts.append(came)
                        waits.append(env.now() - came)
                        yield self.hold(rng.expovariate(wl.MU))
                    if not self.failed:
                        self.release()
                        return
                if retries == wl.MAX_RETRIES:
                    count["dead"] += 1
                    return
                retries += 1
                count["retries"] += 1
                yield self.hold(wl.backoff(retries))

    class Down(sim.Component):
        def process(self):
            start, length = outage
            yield self.hold(start)
            state["down"] = True
            for c in [*servers.claimers(), *servers.requesters()]:
                c.failed = True
                c.release()  # frees its slot if it holds one
                c.activate()  # cuts its hold or its request short
            yield self.hold(length)
            state["down"] = False

    class Source(sim.Component):
        def process(self):
            make = Customer if outage is None else RetryingCustomer
            while True:
                yield self.hold(rng.expovariate(wl.LAMBDA))
                make()

    Source()
    if outage is not None:
        Down()
    cpu = time.process_time()
    env.run(till=wl.DURATION)
    cpu = time.process_time() - cpu
    return {"cpu": cpu, "calls": count["calls"], "retries": count["retries"],
            "dead_lettered": count["dead"],
            "wait_batches": wl.batch_waits(starts, waits, wl.check_window(workload))}


# -- the floor -------------------------------------------------------------------------------


def floor_model(workload: str) -> dict:
    from floor import FLOORS, timed

    return timed(FLOORS[workload], wl.SEED)


# -- the outage story -------------------------------------------------------------------------


def story_spec() -> dict:
    """``outage.yaml`` at 10,000 workers as ``engine.py`` scales it: the scenario for
    herdsim, and its parameters for the SimPy models."""
    from engine import naive_params, scaled_scenario

    sc = scaled_scenario(STORY_WORKERS, STORY_DURATION, False, [])
    return {"scenario": sc.model_dump(mode="json", exclude_defaults=True),
            "naive": {**naive_params(sc), "timeout": sc.downstream.timeout},
            "label": f"outage.yaml at {sc.workers.count:,} workers, {sc.duration:g} s"}


def herdsim_story(story: dict) -> dict:
    return herdsim_model("story", story["scenario"])


def naive_story(story: dict) -> dict:
    """``engine.py``'s naive model: it counts calls only."""
    from engine import naive_model

    cpu = time.process_time()
    calls = naive_model(story["naive"])
    return {"cpu": time.process_time() - cpu, "calls": calls}


def simpy_story(story: dict) -> dict:
    """The story in plain SimPy as a user would write it: worker processes take jobs from a
    ``simpy.Store`` and call a ``simpy.Resource``; a call waits at most until its client
    deadline, and one served past it is finished by the server (wasted) while the client
    fails; the outage interrupts the calls in flight; exponential backoff, then the DLQ."""
    import simpy

    p = story["naive"]
    rng = random.Random(p["seed"])
    env = simpy.Environment()
    jobs = simpy.Store(env)
    slots = simpy.Resource(env, p["concurrency"])
    limit = float("inf") if p["queue_limit"] is None else p["queue_limit"]
    timeout, mean = p["timeout"], p["service"]
    in_flight: set = set()
    state = {"down": 0}
    count = {"calls": 0, "retries": 0, "dead": 0}

    def producer():
        for _ in range(p["backlog"]):
            jobs.put(0.0)
        while True:
            yield env.timeout(rng.expovariate(p["rate"]))
            jobs.put(env.now)

    def serve_out(req, rest):  # the server finishes a call whose client has left
        yield env.timeout(rest)
        slots.release(req)

    def call(me):
        """One call: True when it succeeds."""
        count["calls"] += 1
        if state["down"] or (slots.count >= slots.capacity and len(slots.queue) >= limit):
            return False
        deadline = env.now + timeout
        req = slots.request()
        in_flight.add(me)
        try:
            if not req.triggered:
                yield req | env.timeout(timeout)
                if not req.triggered:
                    req.cancel()
                    return False
            service = rng.expovariate(1.0 / mean)
            if env.now + service <= deadline:
                yield env.timeout(service)
                slots.release(req)
                return True
            env.process(serve_out(req, service))
            yield env.timeout(deadline - env.now)
            return False
        except simpy.Interrupt:  # the outage failed it
            if req.triggered:
                slots.release(req)
            else:
                req.cancel()
            return False
        finally:
            in_flight.discard(me)

    def worker():
        me = env.active_process
        while True:
            yield jobs.get()
            retries = 0
            while not (yield from call(me)):
                if retries == p["max_retries"]:
                    count["dead"] += 1
                    break
                retries += 1
                count["retries"] += 1
                yield env.timeout(min(p["cap"], p["base"] * 2 ** (retries - 1)))

    def outage(start, duration):
        yield env.timeout(start)
        state["down"] += 1
        for proc in list(in_flight):
            proc.interrupt()
        yield env.timeout(duration)
        state["down"] -= 1

    env.process(producer())
    for start, duration in p["outages"]:
        env.process(outage(start, duration))
    for _ in range(p["workers"]):
        env.process(worker())
    cpu = time.process_time()
    env.run(until=p["duration"])
    return {"cpu": time.process_time() - cpu, "calls": count["calls"],
            "retries": count["retries"], "dead_lettered": count["dead"]}


STORY = {"herdsim": herdsim_story, "baseline": herdsim_story, "simpy": simpy_story,
         "naive": naive_story}


# -- the registry, the children and the table ------------------------------------------------

MODELS = {  # model -> (the module it needs, the function, the workloads it has)
    "herdsim": ("herdsim", herdsim_model, ("W1", "W2", "story")),
    "baseline": ("herdsim", herdsim_model, ("W1", "W2", "story")),
    "simpy": ("simpy", simpy_model, ("W1", "W2", "story")),
    "naive": ("simpy", None, ("story",)),
    "ciw": ("ciw", ciw_model, ("W1", "W2")),
    "salabim": ("salabim", salabim_model, ("W1", "W2")),
    "happysim": ("happysim", None, ()),
    "floor": (None, floor_model, ("W1", "W2")),
}
NOT_MODELLED = {
    ("ciw", "story"): "a closed pool of workers holding their jobs through backoff and "
                      "client timeouts are outside ciw's open networks",
    ("salabim", "story"): "not written yet",
    ("floor", "story"): "not written",
}


def skipped(model: str) -> str | None:
    """Why *model* cannot run here, or None."""
    module = MODELS[model][0]
    if model == "happysim":
        why = ("it installs on Python >= 3.13 only" if sys.version_info < (3, 13)
               else "peers.py has no happysim model yet")
        return f"skipped: {why} (this is Python {sys.version.split()[0]})"
    if module is not None and importlib.util.find_spec(module) is None:
        return f"skipped: {module} is not installed (pip install {module})"
    return None


def child(model: str, workload: str, story: dict, baseline: str | None) -> dict:
    """Run *model* on *workload* once in a fresh interpreter; what it measured. The
    ``baseline`` model is herdsim as found in the directory *baseline*."""
    spec = {"model": model, "workload": workload, "story": story}
    env = dict(os.environ)
    if model == "baseline":
        env["PYTHONPATH"] = baseline  # type: ignore[assignment]  # given with --baseline
    proc = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(spec),
                          capture_output=True, text=True, cwd=HERE, env=env)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["failed"]
        return {"error": lines[-1]}
    return json.loads(proc.stdout)


def run_child(spec: dict) -> dict:
    """The child's side: run the model on the workload; what it measured, peak RSS added."""
    from engine import peak_rss_mb

    model, workload = spec["model"], spec["workload"]
    run = STORY[model] if workload == "story" else MODELS[model][1]
    result = run(spec["story"] if workload == "story" else workload)
    return {**result, "rss_mb": peak_rss_mb()}


def best_of(runs: list[dict]) -> dict:
    """The fastest of *runs* by CPU time; the peak RSS is the largest seen."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    best = min(runs, key=lambda r: r["cpu"])
    return {**best, "rss_mb": max(r["rss_mb"] for r in runs)}


def story_problems(result: dict, ours: dict | None) -> list[str]:
    """What of the story *result* differs from herdsim's run by more than the tolerance."""
    if ours is None or "error" in ours:
        return []
    problems = []
    for key in ("calls", "retries", "dead_lettered"):
        if key in result and abs(result[key] - ours[key]) > STORY_TOLERANCE * ours[key]:
            problems.append(f"{key} {result[key]:,} vs herdsim's {ours[key]:,}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs by CPU time")
    parser.add_argument("--workloads", default="W1,W2,story",
                        help="comma-separated, of W1, W2, story (default: all)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--baseline", metavar="PATH",
                        help="also run the herdsim package found in PATH (e.g. a release "
                             "installed with pip install --target PATH) as 'baseline'")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(json.load(sys.stdin))))
        return
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip() and m.strip() != "baseline"]
    if args.baseline:
        models.insert(1, "baseline")
    unknown = ([w for w in workloads if w not in (*wl.WORKLOADS, "story")]
               + [m for m in models if m not in MODELS])
    if unknown or args.repeat < 1:
        parser.error(f"unknown workload or model: {', '.join(unknown)}" if unknown
                     else "--repeat must be at least 1")

    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(160, shutil.get_terminal_size().columns))
    notes = [f"{m}: {why}" for m in models if (why := skipped(m))]
    story = story_spec() if "story" in workloads else None
    plan = [(w, m) for w in workloads for m in models
            if not skipped(m) and w in MODELS[m][2]]
    notes += [f"{m}, {w}: not modelled: {NOT_MODELLED[m, w]}" for w in workloads
              for m in models if (m, w) in NOT_MODELLED and not skipped(m)]
    runs: dict[tuple[str, str], list[dict]] = {key: [] for key in plan}
    for round_ in range(args.repeat):  # interleaved, so a busy spell hits every model
        for workload, model in plan:
            with console.status(f"{workload}: {model} ({round_ + 1} of {args.repeat})…"):
                runs[workload, model].append(child(model, workload, story, args.baseline))
    results = {key: best_of(r) for key, r in runs.items()}

    console.print(
        f"best of {args.repeat} by process CPU time, Python {sys.version.split()[0]}; "
        f"W1: M/M/{wl.C}, {wl.LAMBDA:g}/s, {wl.MU:g}/s a server, {wl.DURATION:g} s, "
        f"Erlang C Wq {wl.wq_theory() * 1e3:.4f} ms; W2: W1 + a {wl.OUTAGE[1]:g} s outage "
        f"at {wl.OUTAGE[0]:g} s, backoff {wl.BASE:g} s / {wl.CAP:g} s / {wl.MAX_RETRIES} "
        f"retries, expected retries {wl.retries_theory(wl.OUTAGE)[0]:,.0f}"
        + (f"; story: {story['label']}" if story else ""), highlight=False)
    table = Table(show_header=True, header_style="bold")
    for column in ("workload", "model", "calls", "CPU s", "calls / CPU s", "herdsim ×",
                   "peak RSS MiB", "Wq ms [99.9% CI]", "retries", "check"):
        table.add_column(column, justify="left" if column in ("workload", "model", "check")
                         else "right")
    for (workload, model), r in results.items():
        if "error" in r:
            table.add_row(workload, model, *[""] * 7, f"FAILED: {r['error']}")
            continue
        ours = results.get((workload, "herdsim"))
        rate = r["calls"] / r["cpu"]
        ratio = ("" if ours is None or "error" in ours or model == "herdsim"
                 else f"{ours['calls'] / ours['cpu'] / rate:.2f}")
        if workload == "story":
            wait, problems = "", story_problems(r, ours)
        else:
            wait, problems = wl.check(workload, r)
        table.add_row(workload, model, f"{r['calls']:,}", f"{r['cpu']:.2f}", f"{rate:,.0f}",
                      ratio, f"{r['rss_mb']:,.0f}", wait,
                      f"{r['retries']:,}" if "retries" in r else "",
                      "DISAGREES: " + "; ".join(problems) if problems else "ok")
    console.print(table)
    for note in notes:
        console.print(note, highlight=False)


if __name__ == "__main__":
    main()

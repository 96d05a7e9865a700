"""The census's cases of issue 36's classes 1 (bounded work), 2 (emulation by allow-list)
and 4 (nested checks that know where they sit), beside ``hostile_census.py``'s own (3, 5,
6, 7, 8); it passes in its ``Case``, ``api``, ``write`` and ``TINY`` (no import back)."""

from __future__ import annotations

from typing import Any

FAN = "--set downstream.calls.0.count=1000"
HEDGED = """\
name: hedged
duration: 60s
workload: {rate: 2500}
workers: {count: 3000}
downstream:
  concurrency: 1000
  timeout: 1s
  service: {distribution: exponential, mean: 100ms}
  outages: [{start: 10s, duration: 5s}]
hedging: {delay: 0s, max_attempts: 100, non_fatal: [down, timeout, error]}
"""  # 150,000 jobs, each call sent as 100 copies at once
SCALED = "--set 'workers.autoscale={metric: queue_depth, target: 1e-9, min: 1, max: 1e9}'"
BIG = 1_000_000_000


def more(Case: Any, api: Any, write: Any, TINY: str) -> list:  # noqa: N803 (the census's)
    """Classes 1, 2 and 4 (*TINY*: the census's one-second scenario)."""
    def tb(name: str, sets: str, word: str, command: str = "testbed") -> Any:
        extra = " --port 0" if command == "serve" else " --out r"
        return Case("2", f"{command}: {name}", f"herdsim {command} {sets}{extra}", "refuse",
                    word, bound=30, leftover="r")

    def nested(name: str, sets: str, word: str, command: str = "validate") -> Any:
        out = " -q --out r" if command in ("run", "sweep") else ""
        grid = " --grid seed=1,2" if command == "sweep" else ""
        return Case("4", f"{command}: {name}", f"herdsim {command} layers {sets}{grid}{out}",
                    "refuse", word, bound=60, leftover="r")

    return [
        # 1: bounded work, refused before anything starts
        Case("1", "run: a fan-out of 1,000 in a 3-tier chain", f"herdsim run layers {FAN} "
             "-q --out r", "refuse", "--force", bound=30, leftover="r"),
        Case("1", "run: 100 hedged copies at delay 0 over 150k jobs (bounded: it ends)",
             "herdsim run h.yaml -q --out r", "ok", bound=300, setup=write("h.yaml", HEDGED)),
        Case("1", "run: autoscale max 1e9 at a target of 1e-9", f"herdsim run outage "
             f"{SCALED} -q --out r", "refuse", "autoscale", bound=30, leftover="r"),
        Case("1", "compare: a billion replications", f"herdsim compare tiny.yaml "
             f"--strategies fixed --replications {BIG} -q --out r", "refuse", "replications",
             bound=30, leftover="r", setup=write("tiny.yaml", TINY)),
        Case("1", "sweep: a billion replications", f"herdsim sweep tiny.yaml --grid "
             f"seed=1,2 --replications {BIG} -q --out r", "refuse", "replications",
             bound=30, leftover="r", setup=write("tiny.yaml", TINY)),
        Case("1", "API: a fan-out of 1,000 in a 3-tier chain", "API", "refuse", "force",
             bound=30, script=api("from herdsim.config import bundled; herdsim.run(herdsim."
                                  "load_scenario(bundled.path('layers'), "
                                  "{'downstream.calls.0.count': 1000}))")),
        Case("1", "API: compare with a billion replications", "API", "refuse",
             "replications", bound=30, setup=write("tiny.yaml", TINY),
             script=api(f"herdsim.compare(herdsim.load_scenario('tiny.yaml'), "
                        f"strategies=['fixed'], replications={BIG})")),
        # 2: the testbed and serve run what they emulate, and refuse the rest by name
        tb("a call graph", "layers", "services"),
        tb("a call graph", "layers", "services", "serve"),
        Case("2", "testbed: a hedged scenario (no retry section: it hedges)",
             "herdsim testbed h.yaml --out r", "refuse", "hedging", bound=60, leftover="r",
             setup=write("h.yaml", TINY + "hedging: {delay: 50ms}\n")),
        tb("deadline propagation", "testbed --set deadline=propagate", "deadline"),
        tb("an adaptive admission limit", "testbed --set "
           "'downstream.admission={kind: aimd}'", "admission"),
        tb("an adaptive admission limit", "testbed --set "
           "'downstream.admission={kind: aimd}'", "admission", "serve"),
        tb("a LIFO waiting room", "testbed --set downstream.discipline=lifo", "discipline"),
        tb("a network delay", "testbed --set 'downstream.network_delay={mean: 1ms}'",
           "network_delay", "serve"),
        tb("open-loop callers", "testbed --set workers.count=null", "workers.count"),
        tb("a client-scoped breaker", "testbed --set workers.count=null --set "
           "workers.clients=9 --set breaker.enabled=true --set breaker.scope=client",
           "workers."),  # the open loop is named first: the more sweeping refusal
        tb("a retry bucket", "testbed --set 'retry.bucket={rate: 5, burst: 5}'", "bucket"),
        # 4: a check inside a service or an edge names where it sits
        nested("a fixed admission without its limit",
               "--set 'services.db.admission={kind: fixed}'", "services.db.admission.limit"),
        nested("adaptive_lifo without its threshold",
               "--set services.db.discipline=adaptive_lifo", "services.db.lifo_threshold"),
        nested("an edge's unknown strategy",
               "--set downstream.calls.0.retry.strategy=nope",
               "downstream.calls.0.retry.strategy"),
        nested("a Retry-After from a limiter it lacks",
               "--set services.db.retry_after=limiter", "services.db.retry_after"),
        nested("a Retry-After from a limiter it lacks",
               "--set services.db.retry_after=limiter", "services.db.retry_after", "run"),
        nested("a Retry-After from a limiter it lacks",
               "--set services.db.retry_after=limiter", "services.db.retry_after", "sweep"),
        nested("a factor on a down outage",
               "--set services.db.outages.0.mode=down --set services.db.outages.0.factor=3",
               "services.db.outages.0.factor"),
        nested("an adaptive budget's k on an edge's token bucket",
               "--set 'services.api.calls.0.budget={kind: token_bucket, preset: aws, k: 3}'",
               "services.api.calls.0.budget.k"),
    ]


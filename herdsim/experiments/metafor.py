"""herdsim beside Metafor's simulator on Metafor's README example.

The example (github.com/mpi-sws-rse/metafor): one server thread serving at μ = 10/s
(exponential), a waiting room of 100, Poisson arrivals at λ = 9.5/s, a client timeout of
3 s armed for every job and 4 retries, each sent at the timeout. In herdsim:
:data:`EXAMPLE`, open-loop callers (Metafor's client is open loop), ``serve_abandoned``
(Metafor serves every job it queued, its client gone or not), a fixed 1 ms sleep (herdsim's
sleeps are above 0; Metafor retries at the timeout itself), and only timeouts retried (a
job Metafor drops at a full waiting room is not retried: its timeout finds it dropped).

:func:`run` measures what ``benchmarks/metafor.py`` measures of Metafor's runs, the same
way: the waiting room (live and abandoned calls, as Metafor's queue holds both) sampled
every 0.1 s for P(full) and mean N, and retries and refusals per second over the run.
Metafor's own numbers, with their provenance, are in ``metafor-reference.json`` beside
this module (:func:`reference`).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from herdsim.config.scenario import Scenario
from herdsim.model.simulation import Simulation

GRID = 0.1  # seconds between samples of the waiting room (benchmarks/metafor.py's)
ROOM = 100
EXAMPLE: dict[str, Any] = {
    "name": "metafor-readme",
    "workload": {"arrivals": "poisson", "rate": 9.5},
    "workers": {"count": None},
    "downstream": {"concurrency": 1, "queue_limit": ROOM, "timeout": "3s",
                   "service": {"distribution": "exponential", "mean": "100ms"},
                   "serve_abandoned": True},
    "retry": {"strategy": "fixed", "base": "1ms", "max_retries": 4,
              "retry_on": ["timeout"]},
}
METRICS = ("p_full", "mean_n", "retries_per_s", "refusals_per_s")


def scenario(seed: int, horizon: float, late_answers: bool) -> Scenario:
    """The example run for *horizon* seconds with *seed*, late answers on or off."""
    spec = {**EXAMPLE, "seed": seed, "duration": horizon, "bin": 10.0,
            "retry": {**EXAMPLE["retry"], "late_answers": late_answers}}
    return Scenario.model_validate(spec)


def run(seed: int, horizon: float, late_answers: bool) -> dict[str, float]:
    """One herdsim run of the example: the four figures of ``benchmarks/metafor.py``."""
    sim = Simulation(scenario(seed, horizon, late_answers))
    env, ds = sim.env, sim.downstream
    samples = round(horizon / GRID)
    room: list[int] = []

    def sample():
        for k in range(samples):
            yield env.timeout(k * GRID - env.now)
            room.append(ds.in_room())

    env.process(sample())
    finished = sim.run()
    rec = finished.recorder
    return {"seed": seed, "horizon": horizon,
            "p_full": sum(n >= ROOM for n in room) / samples,
            "mean_n": sum(room) / samples,
            "retries_per_s": len(rec.sleep_time) / horizon,
            "refusals_per_s": len(rec.rejected) / horizon}


def reference() -> dict[str, Any]:
    """Metafor's runs of the example (``benchmarks/metafor.py``) with their provenance."""
    text = resources.files(__package__).joinpath("metafor-reference.json").read_text()
    return json.loads(text)

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
On the same grid it measures what Metafor's CTMC counts (its state's queue: the jobs in
the system, waiting or in service, live or abandoned; full at ``room`` + 1): P(full) and
mean N after a warm-up, and the first time the system is empty (``drain``, None when it
never is: censored at the horizon).
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


def scenario(seed: int, horizon: float, late_answers: bool, *, room: int = ROOM,
             only_timeouts: bool = True, backlog: int = 0) -> Scenario:
    """The example run for *horizon* seconds with *seed*, late answers on or off; a
    waiting room of *room*, only timeouts retried (Metafor's client) or every failure
    (herdsim's default), *backlog* calls offered at t = 0 (a full start)."""
    retry = {**EXAMPLE["retry"], "late_answers": late_answers}
    if not only_timeouts:
        del retry["retry_on"]
    spec = {**EXAMPLE, "seed": seed, "duration": horizon, "bin": 10.0, "retry": retry,
            "workload": {**EXAMPLE["workload"], "backlog": backlog},
            "downstream": {**EXAMPLE["downstream"], "queue_limit": room}}
    return Scenario.model_validate(spec)


def run(seed: int, horizon: float, late_answers: bool, *, room: int = ROOM,
        only_timeouts: bool = True, backlog: int = 0, warm: float = 0.0
        ) -> dict[str, float | None]:
    """One herdsim run of the example: the four figures of ``benchmarks/metafor.py``, and
    the CTMC's (``system_p_full``, ``system_mean_n`` over the samples from *warm* on;
    ``drain``: the first sample with the system empty, or None)."""
    sim = Simulation(scenario(seed, horizon, late_answers, room=room,
                              only_timeouts=only_timeouts, backlog=backlog))
    env, ds = sim.env, sim.downstream
    samples = round(horizon / GRID)
    waiting: list[int] = []
    system: list[int] = []

    def sample():
        for k in range(samples):
            yield env.timeout(k * GRID - env.now)
            waiting.append(ds.in_room())
            system.append(waiting[-1] + ds.busy)

    env.process(sample())
    finished = sim.run()
    rec = finished.recorder
    settled = system[round(warm / GRID):]
    empty = next((k for k, n in enumerate(system) if k and not n), None)
    return {"seed": seed, "horizon": horizon,
            "p_full": sum(n >= room for n in waiting) / samples,
            "mean_n": sum(waiting) / samples,
            "retries_per_s": len(rec.sleep_time) / horizon,
            "refusals_per_s": len(rec.rejected) / horizon,
            "system_p_full": sum(n >= room + 1 for n in settled) / len(settled),
            "system_mean_n": sum(settled) / len(settled),
            "drain": None if empty is None else empty * GRID}


def reference() -> dict[str, Any]:
    """Metafor's runs of the example (``benchmarks/metafor.py``) with their provenance."""
    text = resources.files(__package__).joinpath("metafor-reference.json").read_text()
    return json.loads(text)

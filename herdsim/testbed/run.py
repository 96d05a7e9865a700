"""``herdsim testbed``: run a scenario for real and write it as ``herdsim run`` does.

:func:`testbed` starts Redis, the emulated downstream, the producer and the worker
processes (:mod:`herdsim.testbed.processes`) in a throwaway directory, runs the scenario
for its duration in wall-clock time, and turns what the processes logged into the
model's raw record (a :class:`~herdsim.model.recorder.Recorder` filled with the real
event times), so the real run has the frames, KPIs, figures and output directory of a
simulated one. The directory adds ``sim_vs_real.png`` and ``sim_vs_real.csv`` (each KPI
simulated and real, and the agreement checks of :mod:`herdsim.testbed.agreement`); its
summary adds the measured lateness and whether the run is valid
(:mod:`herdsim.testbed.timing`). Whatever happens, every process is stopped and the
directory removed before :func:`testbed` returns or raises.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import redis

from herdsim.config.scenario import Scenario
from herdsim.errors import TestbedError
from herdsim.model import job_streams
from herdsim.model.finished import Finished
from herdsim.model.recorder import DEAD_LETTERED, Recorder
from herdsim.model.workload import Job, make_job
from herdsim.outputs.compare_dir import save_run
from herdsim.outputs.prometheus_server import OWNER, clear_stale
from herdsim.planning import estimate
from herdsim.plots.sim_vs_real import sim_vs_real
from herdsim.results.result import Result
from herdsim.results.result import run as simulate
from herdsim.testbed import agreement, calibrate, dilation, live, timing
from herdsim.testbed.emulates import check_supported
from herdsim.testbed.jobs import DELAYED, DLQ, MAIN, WireJob
from herdsim.testbed.processes import Fleet, redis_binary

WORKDIR_PREFIX = "herdsim-testbed-"
START_DELAY = 1.0  # s between handing out t0 and t0: every child is waiting by then
FINISH_GRACE = 30.0  # s after the end the children get to write their logs and exit
MAX_RUNS = 100  # real runs of one testbed
SIMULATION_ONLY = ("wall_seconds", "calls_per_wall_second")  # not in a real run's summary


@dataclass
class Testbed:
    """A finished testbed: the real :class:`Result` of the first run and the simulated one
    beside it, the table (each KPI, then the checks over every valid run), one row per run
    (``runs``), and whether enough runs were valid to judge the agreement."""

    __test__ = False

    real: Result
    sim: Result
    table: pd.DataFrame
    prometheus: dict | None = None  # --prometheus: what it scraped (live.read)
    runs: pd.DataFrame | None = None  # one row per run (agreement.per_run)
    judged: bool = False  # at least agreement.MIN_VALID (or every run) valid
    turnaround: pd.DataFrame | None = None  # every served attempt (calibrate.attempts)
    overhead: dict | None = None  # calibrate: the attempt_overhead the simulation was given

    @property
    def agrees(self) -> bool:
        """Every check judged agrees (and there was something to judge)."""
        verdicts = self.table["agrees"].dropna()
        return self.judged and bool(verdicts.astype(bool).all())


def testbed(scenario: Scenario, out: str | Path, processes: int = 2,
            formats: Sequence[str] = ("png",), say: Callable[[str], None] = lambda _: None,
            bound: float = timing.BOUND, prometheus: bool = False,
            source: str | None = None, force: bool = False, runs: int = 1,
            dilate: float = 1.0, calibrate_overhead: bool = False) -> Testbed:
    """Run *scenario* for real *runs* times (seeds ``seed``, ``seed + 1`` …) with its
    workers spread over *processes* worker processes, simulate each seed beside it, write
    the output directory *out* (the first run's, plus every run's row and the checks), and
    return the first run, the table and the runs. *say* hears what is happening (one line
    at a time). With *dilate* K, every run is of the dilated scenario (every duration × K,
    every rate ÷ K: :mod:`herdsim.testbed.dilation`) and reported back in the scenario's
    units. With *prometheus*, a real Prometheus scrapes every process during the first run
    (:mod:`herdsim.testbed.live`); what it scraped is written to ``prometheus.json``. What
    the testbed does not run is refused first (:mod:`herdsim.testbed.emulates`), naming
    *source* (the scenario's file) or the scenario; its simulation beside it is checked
    against the budget before anything starts (unless *force*). With
    *calibrate_overhead*, each seed is simulated after every real run, with
    ``workers.attempt_overhead`` the lognormal fitted to the turnaround those runs
    measured (their valid runs', or every run's when none was valid):
    :func:`herdsim.testbed.calibrate.fit`."""
    check_supported(scenario, source=source)
    estimate.check([scenario], force=force)
    if not 1 <= runs <= MAX_RUNS:
        raise TestbedError(f"--runs {runs}: from 1 to {MAX_RUNS} runs")
    dilation.dilate(scenario, dilate)  # refused before anything starts
    redis_binary()  # missing: said before anything starts
    if prometheus:
        live.check_installed()
    if processes < 1:
        raise TestbedError(f"--processes {processes}: needs at least one worker process")
    count = scenario.workers.count
    assert count is not None  # check_supported refused open-loop callers
    processes = min(processes, count)
    seeds = [scenario if i == 0 else scenario.model_copy(update={"seed": scenario.seed + i})
             for i in range(runs)]
    reals, sims, scraped, turnarounds = [], [], None, []
    for i, sc in enumerate(seeds):
        if runs > 1:
            say(f"run {i + 1} of {runs} (seed {sc.seed})")
        real, got, turnaround = _once(sc, processes, say, bound, prometheus and i == 0,
                                      dilate)
        scraped = got if i == 0 else scraped
        turnarounds.append(turnaround.assign(seed=sc.seed, valid=real.summary["testbed_valid"]))
        reals.append(real)
        if not calibrate_overhead:
            sims.append(_simulate(sc, say))
    attempts = pd.concat(turnarounds, ignore_index=True)
    overhead = None
    if calibrate_overhead:
        overhead = calibrate.fit(calibrate.measured(attempts)["turnaround"].to_numpy())
        if overhead is None:
            raise TestbedError("--calibrate: the real runs served fewer than two attempts; "
                               "there is no turnaround to fit")
        say(f"simulating every seed with the turnaround measured: {overhead}")
        sims = [_simulate(calibrate.given(sc, overhead), say) for sc in seeds]
    table = agreement.table(sims, reals)
    per_run = agreement.per_run(sims, reals)
    valid = int(per_run["valid"].sum())
    judged = valid >= min(agreement.MIN_VALID, runs)
    real, sim = reals[0], sims[0]

    def extra(staging: Path) -> None:
        table.to_csv(staging / "sim_vs_real.csv", index=False)
        per_run.to_csv(staging / "runs.csv", index=False)
        calibrate.summary(attempts).to_csv(staging / "turnaround.csv", index=False)
        if scraped is not None:
            (staging / "prometheus.json").write_text(json.dumps(scraped, indent=1) + "\n")
        s = real.summary
        note = (f"lateness p99 {s['lateness_p99_ms']:.1f} ms "
                + ("(within the bound)" if s["testbed_valid"] else
                   f"(INVALID: {s['testbed_invalid_reason']})"))
        if dilate != 1:
            note += f", run {dilate:g}× slower (--dilate), shown in the scenario's time"
        if overhead is not None:
            note += (f"; simulated with the turnaround measured (lognormal, mean "
                     f"{overhead['mean']}, sigma {overhead['sigma']:g})")
        sim_vs_real(scenario, sim.timeseries, real.timeseries, note).savefig(
            staging / "sim_vs_real.png")

    save_run(real, out, formats, extra)
    return Testbed(real, sim, table, scraped, per_run, judged, attempts, overhead)


def _simulate(scenario: Scenario, say) -> Result:
    """The simulation of one real run's scenario and seed, each job's jitter drawn as the
    real workers draw it."""
    say(f"simulating seed {scenario.seed}…")
    with job_streams.active():
        return simulate(scenario, force=True)  # checked before the real runs


def _once(scenario: Scenario, processes: int, say, bound: float, prometheus: bool,
          k: float) -> tuple[Result, dict | None, pd.DataFrame]:
    """One real run of *scenario* (dilated *k* times, reported back in its own units), in
    a throwaway directory every process of which is stopped and removed on the way out."""
    clear_stale(prefix=WORKDIR_PREFIX)  # left by a testbed killed with SIGKILL
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    fleet = Fleet(workdir)
    try:
        (workdir / OWNER).write_text(str(os.getpid()))
        real, lateness, scraped, turnaround = _run(scenario, k, fleet, processes, say,
                                                   prometheus)
    finally:
        fleet.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    # lateness in the scenario's time: a run K times slower is K times less late to it
    real.summary.update(timing.summarize({kind: v / k for kind, v in lateness.items()}, bound))
    real.summary["testbed_processes"] = processes
    real.summary["testbed_dilation"] = k
    return real, scraped, turnaround


def _run(original: Scenario, k: float, fleet: Fleet, processes: int, say,
         prometheus: bool
         ) -> tuple[Result, dict[str, np.ndarray], dict | None, pd.DataFrame]:
    """Start everything, run *original* dilated *k* times, collect: the real run's
    :class:`Result` in *original*'s units, the lateness samples of every process, and what
    Prometheus scraped (with *prometheus*)."""
    scenario = dilation.dilate(original, k)
    say("starting redis-server…")
    redis_url = fleet.start_redis()
    base = {"scenario": scenario.to_dict(), "redis": redis_url, "metrics": prometheus}
    logs = fleet.workdir
    server = fleet.start_role("server", "server", {**base, "log": str(logs / "server.npz")})
    port = fleet.ready(server)
    url = f"http://127.0.0.1:{port}/call"
    producer = fleet.start_role("producer", "producer",
                                {**base, "log": str(logs / "producer.npz")})
    counts = np.diff(np.linspace(0, scenario.workers.count or 0, processes + 1).round()).astype(int)
    workers = [fleet.start_role("workers", f"workers {i}", {
        **base, "downstream": url, "count": int(n), "index": i,
        "log": str(logs / f"workers-{i}.npz")}) for i, n in enumerate(counts)]
    say(f"starting the downstream on {url}, the producer and {processes} worker "
        f"processes ({scenario.workers.count} workers)…")
    ports = [fleet.ready(child) for child in (producer, *workers)]
    url_prometheus = None
    if prometheus:
        say("starting prometheus…")
        url_prometheus = live.start(fleet, {"downstream": [port], "producer": ports[:1],
                                            "workers": ports[1:]})
        say(f"prometheus: {url_prometheus} (scraping every process every "
            f"{live.SCRAPE_INTERVAL:g} s; stopped when the run ends)")
    roles = [server, producer, *workers]
    t0 = time.monotonic() + START_DELAY
    t0_unix = time.time() + (t0 - time.monotonic())
    fleet.go(roles, t0)
    say(f"running {scenario.duration:g} s of {scenario.name} for real…")
    fleet.wait(roles, t0 + scenario.duration + FINISH_GRACE)
    wall = time.monotonic() - t0
    scraped = (None if url_prometheus is None
               else live.read(url_prometheus, t0_unix, scenario.duration))
    client = redis.Redis.from_url(redis_url)
    try:
        queued: list[bytes] = [*cast(list, client.lrange(MAIN, 0, -1)),
                               *cast(list, client.zrange(DELAYED, 0, -1))]
        dead_letters = cast(int, client.llen(DLQ))
    finally:
        client.close()
    server_log = _load(logs / "server.npz")
    producer_log = _load(logs / "producer.npz")
    worker_logs = [_load(logs / f"workers-{i}.npz") for i in range(processes)]
    lateness = {kind: np.concatenate([log[f"lateness.{kind}"] for log in
                                      (server_log, producer_log, *worker_logs)])
                for kind in timing.KINDS}
    real = _result(original, server_log, producer_log, worker_logs,
                   [WireJob.decode(p) for p in queued], dead_letters, wall, k)
    return real, lateness, scraped, calibrate.attempts(worker_logs, k)


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def _result(scenario: Scenario, server: dict, producer: dict, workers: list[dict],
            queued: list[WireJob], dead_letters: int, wall: float, k: float = 1.0) -> Result:
    """The model's raw record rebuilt from the processes' logs, then frames and KPIs;
    a run *k* times dilated has its times divided by *k* (its bins are *k* times wider:
    the per-bin gauges stand as they are).
    Its summary has the real run's own wall time (``testbed_wall_seconds``, *wall* as
    measured) and no simulation's speed (``wall_seconds``, ``calls_per_wall_second``).
    ``testbed_unaccounted_jobs`` counts the jobs found in no place or in two, and the
    difference between the DLQ list's length and the dead letters the workers logged."""
    rec = Recorder()

    def fill(name: str, values: np.ndarray) -> None:
        getattr(rec, name).extend((np.sort(values) / k).tolist())

    fill("arrivals", producer["events.arrivals"])
    fill("refused", producer["events.refused"])
    for name in ("attempts", "rejected", "errors", "wasted", "crashes"):
        fill(name, server[f"events.{name}"])
    for name in ("timeouts", "short_circuited", "budget_refused", "recycled"):
        fill(name, np.concatenate([w[f"events.{name}"] for w in workers]))
    finished = {k: np.concatenate([w[f"finished.{k}"] for w in workers])
                for k in ("id", "time", "attempts", "outcome")}
    rec.finish_id.extend(finished["id"].astype(int).tolist())
    rec.finish_time.extend((finished["time"] / k).tolist())
    rec.finish_attempts.extend(finished["attempts"].astype(int).tolist())
    rec.finish_outcome.extend(finished["outcome"].astype(int).tolist())
    sleeps = {k: np.concatenate([w[f"sleeps.{k}"] for w in workers])
              for k in ("time", "job", "attempt", "sleep")}
    order = np.argsort(sleeps["time"], kind="stable")
    for t, job, attempt, pause in zip(*(sleeps[k][order] for k in ("time", "job", "attempt",
                                                                  "sleep")), strict=True):
        rec.record_sleep(float(t) / k, int(job), int(attempt), float(pause) / k)
    n_bins = max(1, int(np.ceil(scenario.duration / scenario.bin - 1e-9)))
    gauges = rec.gauges
    for name in ("in_flight", "waiting", "downstream_up"):
        gauges[name] = server[f"gauges.{name}"].tolist()
    gauges["queue_depth"] = producer["events.queue_depth"].tolist()
    sleeping = _stack([w["events.sleeping"] for w in workers]).sum(axis=0)
    delayed = producer["events.delayed"]
    k = min(len(delayed), len(sleeping))
    gauges["delayed"] = (delayed[:k] + sleeping[:k]).tolist()
    gauges["breaker_open"] = _stack([w["events.breaker_open"] for w in workers]).mean(
        axis=0).tolist()
    pending = [_job(job.id, job.poison, job.attempts) for job in queued]
    for w in workers:
        pending += [_job(int(i), False, int(a)) for i, a in
                    zip(w["pending.id"], w["pending.attempts"], strict=True)]
    # trips: each process counted its breakers' (a pool's one breaker: each saw all of
    # its trips, counted once); open time: the sampled share not closed, bin by bin
    trips = [float(w["events.breaker_trips"].sum()) for w in workers]
    shared = scenario.breaker.scope == "pool"
    result = Result.from_finished(Finished(
        scenario, rec, n_bins, pending, wall,
        breaker_trips=int(max(trips) if shared else sum(trips)),
        breaker_open_time=float(np.sum(gauges["breaker_open"])) * scenario.bin))
    for key in SIMULATION_ONLY:  # a simulation's speed: nothing a real run measured
        del result.summary[key]
    result.summary["testbed_wall_seconds"] = wall
    submitted = len(rec.arrivals)
    seen = np.concatenate([finished["id"], [job.id for job in pending]]).astype(int)
    unique = len(np.unique(seen))
    logged_dead = int((finished["outcome"] == DEAD_LETTERED).sum())
    result.summary["testbed_unaccounted_jobs"] = int(
        submitted - unique + len(seen) - unique + abs(dead_letters - logged_dead))
    return result


def _job(job_id: int, poison: bool, attempts: int) -> Job:
    job = make_job(job_id, poison, 0.0)
    job.attempts = attempts
    return job


def _stack(arrays: list[np.ndarray]) -> np.ndarray:
    """Per-bin samples of several processes, cut to the shortest."""
    k = min(len(a) for a in arrays)
    return np.vstack([a[:k] for a in arrays]) if k else np.zeros((len(arrays), 0))

"""The testbed with a real ``redis-server`` (Debian's ``redis-server``; ``.ci/run``
installs it; without it these tests skip, and fail under CI: ``requires`` in conftest).

* the delayed set's poller moves exactly the due jobs, in due order;
* a short real run writes ``herdsim run``'s directory (read back by the same reader, every
  job in exactly one place), leaves no process and no temporary directory, and agrees
  with the simulation when the machine kept up (otherwise the lateness is reported:
  a loaded machine is not a failure of the model);
* SIGINT, SIGTERM, and a crashed worker process stop every process and remove the
  temporary directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
import redis.asyncio as aioredis

from herdsim import run as herdsim_run
from herdsim.analysis import promql
from herdsim.config.loading import load_scenario
from herdsim.errors import TestbedError
from herdsim.outputs.compare_dir import load_outputs
from herdsim.policies.durations import format_duration
from herdsim.testbed import agreement, calibrate
from herdsim.testbed import run as testbed_run
from herdsim.testbed.jobs import DELAYED, MAIN, WireJob, move_due
from herdsim.testbed.processes import Fleet

SHORT = {"duration": "8s", "downstream.outages.0.start": "3s", "workers.count": 150,
         "workload.rate": 100, "downstream.concurrency": 30}


def leftovers() -> list[Path]:
    return [p for p in Path(tempfile.gettempdir()).glob(f"{testbed_run.WORKDIR_PREFIX}*")
            if (p / "owner.pid").is_file() and (p / "owner.pid").read_text() == str(os.getpid())]


@pytest.mark.requires("redis-server")
def test_the_poller_moves_the_due_jobs_in_due_order(tmp_path):
    """ZADD in shuffled order; the poll at t = 2.5 moves the jobs due at or before it,
    earliest first, to the tail of the main queue; later ones stay parked."""
    fleet = Fleet(tmp_path)
    try:
        url = fleet.start_redis()

        async def scenario():
            client = aioredis.Redis.from_url(url)
            await client.rpush(MAIN, WireJob(99, False, 1, 0, 0.1).encode())
            due = {7: 2.0, 3: 0.5, 5: 2.5, 1: 3.0, 4: 1.0, 8: 9.0}
            for job, at in due.items():
                await client.zadd(DELAYED, {WireJob(job, False, 1, 1, 0.1).encode(): at})
            moved = await move_due(client, 2.5)
            queue = [WireJob.decode(p).id for p in await client.lrange(MAIN, 0, -1)]
            parked = [WireJob.decode(p).id for p in await client.zrange(DELAYED, 0, -1)]
            await client.aclose()
            return moved, queue, parked

        moved, queue, parked = asyncio.run(scenario())
    finally:
        fleet.stop()
    assert moved == 4
    assert queue == [99, 3, 4, 7, 5]
    assert parked == [1, 8]


@pytest.mark.requires("redis-server")
def test_two_testbeds_at_once_take_different_ports(tmp_path):
    fleets = [Fleet(tmp_path / "a"), Fleet(tmp_path / "b")]
    try:
        for fleet in fleets:
            fleet.workdir.mkdir()
        urls = [fleet.start_redis() for fleet in fleets]
    finally:
        for fleet in fleets:
            fleet.stop()
    assert urls[0] != urls[1] and all(u.startswith("redis://127.0.0.1:") for u in urls)


# one AWS retry quota of 100 tokens (7 retries at 14 each, then refunds) for the whole
# pool: shared by both worker processes through Redis, it refuses what the simulated
# pool's one quota refuses; a quota per process would allow twice the outage's retries
POOL_BUDGET = {"budget.kind": "token_bucket", "budget.preset": "aws", "budget.capacity": 100,
               "budget.scope": "pool"}


@pytest.mark.slow
@pytest.mark.requires("redis-server")
@pytest.mark.parametrize(("mode", "prometheus", "budget"), [
    ("sleep", False, POOL_BUDGET),
    pytest.param("requeue", True, {}, marks=pytest.mark.requires("prometheus"))])
def test_a_short_real_run_writes_a_run_directory_and_leaves_nothing(tmp_path, mode,
                                                                      prometheus, budget):
    """Sleep mode holds the job in the worker; requeue parks it with ZADD and the poller
    (every 250 ms) brings it back; max_retries 3 sends some jobs to the DLQ list. The
    sleep run has a pool budget shared through Redis (when the machine kept up, it
    retries and refuses as the simulation does, within 2 retries and 5% of refusals);
    the requeue run is scraped by a real Prometheus (its checks: :func:`_check_scraped`).

    Not a 100 ms poll: the peak check's window is 100 ms too, and the simulation's polls
    land exactly one window apart, so its busiest window holds one poll's release where
    a real one, a millisecond less late than the one before, holds two (see
    docs/validation.md, where they differ)."""
    sc = load_scenario(Path(__file__).parents[2] / "scenarios" / "testbed.yaml",
                       {**SHORT, "workers.retry_mode": mode, "workers.poll_interval": "250ms",
                        "retry.max_retries": 3, **budget})
    out = tmp_path / "real"
    done = testbed_run.testbed(sc, out, prometheus=prometheus)
    me = psutil.Process()
    assert me.children(recursive=True) == []
    assert leftovers() == []
    # the directory of herdsim run, read back by its reader, plus the comparison
    loaded = load_outputs(out)
    assert {"sim_vs_real.png", "sim_vs_real.csv", "timeline.png", "jobs.parquet"} <= {
        p.name for p in out.iterdir()}
    s = done.real.summary
    assert loaded.runs.iloc[0]["jobs_submitted"] == s["jobs_submitted"]
    # every job in exactly one place: succeeded, dead-lettered or pending
    assert s["testbed_unaccounted_jobs"] == 0
    assert s["jobs_succeeded"] + s["jobs_dead_lettered"] + s["jobs_pending"] == \
        s["jobs_submitted"] > 0
    # the producer pushed the simulation's own arrivals (same stream, same seed)
    assert abs(s["jobs_submitted"] - done.sim.summary["jobs_submitted"]) <= 1
    for key in ("lateness_timer_p99_ms", "lateness_loop_p99_ms", "lateness_producer_p99_ms"):
        assert s[key] >= 0
    checks = agreement.checks(done.sim, done.real)
    print(f"lateness p99 {s['lateness_p99_ms']:.1f} ms, valid: {s['testbed_valid']}\n"
          f"{checks.to_string()}")
    sim = done.sim.summary
    print(f"retries {sim['retries_total']} simulated, {s['retries_total']} real; refused "
          f"by the budget {sim['budget_refused_total']}, {s['budget_refused_total']}")
    assert checks["agrees"].isna().all()  # one run: no spread to judge by
    if s["testbed_valid"]:
        if budget:
            assert sim["budget_refused_total"] > 0
            assert abs(s["retries_total"] - sim["retries_total"]) <= 2
            assert abs(s["budget_refused_total"] - sim["budget_refused_total"]) <= \
                0.05 * sim["budget_refused_total"]
    else:
        assert s["testbed_invalid_reason"].startswith("the machine could not keep up")
    if prometheus:
        _check_scraped(done, json.loads((out / "prometheus.json").read_text()))
    else:
        assert done.prometheus is None and not (out / "prometheus.json").exists()


@pytest.mark.slow
@pytest.mark.requires("redis-server")
def test_a_dilated_real_run_reports_in_the_scenarios_units_with_its_turnaround_and_trips(
        tmp_path):
    """``--dilate 2`` with a pool breaker: the run took twice the scenario's time (its
    ``testbed_wall_seconds``), its
    record is in the scenario's (the producer pushed the simulation's own arrivals, so
    the same jobs at the same scenario times; every finish within the scenario's end),
    its breaker trips are logged (the simulation trips it too), and every served attempt
    has its turnaround, each component >= 0 on the one clock. Calibrated, the simulation
    beside it was given the fit of that turnaround (and nothing else changed)."""
    sc = load_scenario(Path(__file__).parents[2] / "scenarios" / "testbed.yaml", {
        **SHORT, "breaker.enabled": True, "breaker.scope": "pool",
        "breaker.minimum_calls": 20, "breaker.open_duration": "500ms"})
    done = testbed_run.testbed(sc, tmp_path / "real", dilate=2, calibrate_overhead=True)
    s, sim = done.real.summary, done.sim.summary
    assert s["testbed_dilation"] == 2
    # its own wall time, as it ran (twice the scenario's, then the processes' exits), and
    # no simulation's speed
    assert 2 * sc.duration <= s["testbed_wall_seconds"] <= 2 * sc.duration + \
        testbed_run.FINISH_GRACE
    assert not set(testbed_run.SIMULATION_ONLY) & set(s)
    assert abs(s["jobs_submitted"] - sim["jobs_submitted"]) <= 1
    arrivals = np.sort(done.real.jobs["arrival"].to_numpy())
    np.testing.assert_allclose(arrivals, np.sort(done.sim.jobs["arrival"].to_numpy())[
        :arrivals.size], atol=0.02)  # the producer's lateness, halved
    assert done.real.jobs["finish"].max() <= sc.duration + 0.5
    assert len(done.real.timeseries) == len(done.sim.timeseries)
    assert sim["breaker_trips"] > 0 and s["breaker_trips"] > 0
    t = done.turnaround
    assert len(t) >= s["attempts_total"] * 0.5
    assert (t[["wake", "out", "back"]] >= -1e-6).all().all()
    np.testing.assert_allclose(t["turnaround"], t["wake"] + t["out"] + t["back"])
    fitted = calibrate.fit(calibrate.measured(t)["turnaround"].to_numpy())
    assert done.overhead == fitted is not None
    given = done.sim.scenario.workers.attempt_overhead
    assert given.distribution == "lognormal" and given.sigma == fitted["sigma"]
    assert f"{given.mean * 1e3:.3g}" == fitted["mean"].removesuffix("ms")
    plain = done.sim.scenario.to_dict()
    del plain["workers"]["attempt_overhead"]
    ours = sc.to_dict()
    ours["workers"].pop("attempt_overhead", None)
    assert plain == ours
    assert leftovers() == []


def _check_scraped(done: testbed_run.Testbed, scraped: dict) -> None:
    """What the live Prometheus scraped is the run's own count:

    * the last scrape of ``worker_job_execution_total`` (every process waits for it
      before it exits) is exactly the run's successes, retries and dead letters;
    * at every step, the scraped total lies between the run's count one scrape interval
      (plus 50 ms of scrape and clock slack) earlier and its count 50 ms later: a sample
      holds the counts of the moment it was scraped, at most one interval before;
    * the brief's query, read back over the run, is ``sum(rate(...[10s]))`` of the raw
      samples Prometheus scraped from the worker processes, as herdsim's own PromQL
      (:func:`herdsim.analysis.promql.rate`, checked against Prometheus's code in
      analysis/test_promql.py) computes it: timestamps read in seconds, nothing lost; and it is
      positive once the outage's retries have been scraped.
    """
    real = done.real
    assert scraped is done.prometheus or scraped == json.loads(json.dumps(done.prometheus))
    assert scraped["url"].startswith("http://127.0.0.1:")
    s = real.summary
    assert scraped["final"] == {"success": s["jobs_succeeded"], "retry": s["retries_total"],
                                "failed_dlq": s["jobs_dead_lettered"]}
    assert s["retries_total"] > 0 and s.get("recycled_total", 0) == 0  # DLQ on
    jobs = real.jobs
    own = {"retry": np.sort(real.sleeps["time"].to_numpy()),
           "success": np.sort(jobs.loc[jobs["outcome"] == "succeeded", "finish"].to_numpy()),
           "failed_dlq": np.sort(jobs.loc[jobs["outcome"] == "dead_lettered",
                                          "finish"].to_numpy())}
    slack, interval = 0.05, scraped["scrape_interval"]
    by_status = {series["labels"]["status"]: series for series in scraped["by_status"]}
    assert set(by_status) == set(own)
    for status, times in own.items():
        series = by_status[status]
        t, v = np.asarray(series["time"]), np.asarray(series["value"])
        assert t.size >= real.scenario.duration / scraped["step"]  # from t0 on
        low = np.searchsorted(times, t - interval - slack, side="right")
        high = np.searchsorted(times, t + slack, side="right")
        assert np.all((low <= v) & (v <= high)), (status, np.c_[t, low, v, high])
    (curve,) = scraped["series"]
    assert curve["labels"] == {"queue": real.scenario.queue}
    assert len(scraped["samples"]) == s["testbed_processes"]  # one series each
    t, v = np.asarray(curve["time"]), np.asarray(curve["value"])
    version = subprocess.run(["prometheus", "--version"], capture_output=True, text=True)
    left_open = int(version.stdout.split("version ")[1].split(".")[0]) >= 3
    t0 = scraped["t0_unix"]  # Prometheus's own time axis: unix seconds
    ours = sum(np.nan_to_num(promql.rate(
        pd.Series(series["value"], index=np.asarray(series["time"]) + t0), "10s",
        step=scraped["step"], start=t[0] + t0, end=t[-1] + t0, left_open=left_open
    ).to_numpy()) for series in scraped["samples"])
    np.testing.assert_allclose(v, ours, rtol=1e-9, atol=1e-12)
    outage_end = max(end for _, end in real.scenario.outage_windows)
    assert np.all(v[t >= outage_end + interval] > 0)


def _start(tmp_path: Path) -> psutil.Popen:
    exe = shutil.which("herdsim")
    assert exe, "the herdsim console script is not installed (pip install -e .)"
    return psutil.Popen([exe, "testbed", "testbed", "--set", "duration=30s", "--out",
                         str(tmp_path / "out"), "--prometheus"], cwd=tmp_path,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running_fleet(proc: psutil.Popen) -> list[psutil.Process]:
    """Wait until redis-server, the server, the producer, both worker processes and
    Prometheus run."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kids = proc.children(recursive=True)
        names = {k.name() for k in kids}
        if len(kids) >= 6 and {"redis-server", "prometheus"} <= names:
            return kids
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("the testbed's processes did not all start")


def _listening(kids: list[psutil.Process]) -> list[str]:
    """The addresses the testbed's processes listen on."""
    found = []
    for kid in kids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found += [c.laddr.ip for c in kid.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN]
    return found


def _gone(pids: list[psutil.Process], grace: float = 10.0) -> list[int]:
    _, alive = psutil.wait_procs(pids, timeout=grace)
    return [p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@pytest.mark.requires("redis-server", "prometheus")
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "a worker process crashes"])
def test_a_signal_or_a_crash_stops_every_process_and_removes_the_temp_dir(tmp_path, how):
    proc = _start(tmp_path)
    kids = _running_fleet(proc)
    deadline = time.monotonic() + 60
    while len(_listening(kids)) < 6:  # Redis, the downstream, the producer's and the
        # workers' /metrics, Prometheus
        assert time.monotonic() < deadline, f"only {_listening(kids)} listened"
        time.sleep(0.1)
    assert set(_listening(kids)) == {"127.0.0.1"}  # nothing listens beyond loopback
    workdirs = {Path(p) for k in kids for p in k.cmdline()
                if testbed_run.WORKDIR_PREFIX in p and p.endswith(".json")}
    tsdb = next(Path(a.split("=", 1)[1]) for k in kids for a in k.cmdline()
                if a.startswith("--storage.tsdb.path="))
    assert tsdb.parent in {p.parent for p in workdirs}  # its TSDB: in the throwaway dir
    assert workdirs  # the spec files of the children live in the temporary directory
    if how == "a worker process crashes":
        worker = next(k for k in kids if "workers" in " ".join(k.cmdline()))
        worker.kill()
    else:
        proc.send_signal(getattr(signal, how))
    _, err = proc.communicate(timeout=60)
    assert _gone(kids) == []  # Prometheus included
    assert not any(Path(p).parent.exists() for p in workdirs)
    assert not (tmp_path / "out").exists()
    if how == "a worker process crashes":
        assert proc.returncode == 2
        assert "the workers 0 exited with code -9" in err or \
            "the workers 1 exited with code -9" in err, err
        assert "Traceback" not in err
    else:
        assert proc.returncode == 130, err


@pytest.mark.slow
def test_without_redis_server_the_testbed_says_which_package_in_one_line(tmp_path):
    """A PATH without redis-server: one line naming the Debian package, exit 2, nothing
    written, nothing started."""
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty folder: no redis-server on it
    done = subprocess.run([sys.executable, "-m", "herdsim", "testbed", "testbed", "--out",
                           str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: redis-server not found on PATH; install the Debian package redis-server "
        "(apt-get install redis-server)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.requires("redis-server")
@pytest.mark.slow
def test_without_prometheus_the_testbed_says_which_package_in_one_line(tmp_path):
    """--prometheus on a PATH with redis-server but no prometheus: one line naming the
    Debian package, exit 2, nothing written, nothing started."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "redis-server").symlink_to(shutil.which("redis-server"))
    env = {**os.environ, "PATH": str(tmp_path / "bin")}
    done = subprocess.run([sys.executable, "-m", "herdsim", "testbed", "testbed", "--out",
                           str(tmp_path / "out"), "--prometheus"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: prometheus not found on PATH")
    assert "apt-get install prometheus" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("field", "value"), [
    ("workers.count", None), ("downstream.model", "occ"),
    ("downstream.network_delay", {"mean": "1ms"}),
    ("downstream.discipline", "lifo"), ("downstream.codel", {}),
    ("downstream.admission", {"kind": "aimd"}),
    ("workers.autoscale", {"metric": "queue_depth", "target": 1, "min": 1, "max": 100000}),
    ("client_limiter", {"kind": "aws_adaptive"}), ("retry.bucket", {"rate": 10, "burst": 5})])
def test_what_the_testbed_does_not_emulate_is_refused_naming_the_field(field, value):
    sc = load_scenario(Path(__file__).parents[2] / "scenarios" / "testbed.yaml",
                       {field: value, **({"workers.count": 10} if field ==
                                         "downstream.model" else {})})
    with pytest.raises(TestbedError, match=f"^testbed: {field}: the testbed does not emulate"):
        testbed_run.check_supported(sc)


def test_the_sim_vs_real_table_leaves_no_placeholder_unfilled(tmp_path):
    """The sim-vs-real table (printed by ``herdsim testbed``, written as sim_vs_real.csv)
    names the peak window as a duration: no ``{window}`` or any other ``{...}`` is left.
    Two simulated runs of the testbed scenario stand in for the simulation and the real
    run (the table only reads their summaries)."""
    import re

    sc = load_scenario(Path(__file__).parents[2] / "scenarios" / "testbed.yaml",
                       SHORT)
    sim = herdsim_run(sc)
    table = agreement.table(sim, sim)
    table.to_csv(tmp_path / "sim_vs_real.csv", index=False)
    written = (tmp_path / "sim_vs_real.csv").read_text()
    assert not re.search(r"\{[^}]*\}", written), written
    window = format_duration(sc.peak_window)
    kpis = table[table["kpi"].isin(agreement.TABLE_KPIS)]
    peaks = [label for label in kpis["label"] if "peak" in label]
    assert peaks and all(f"in {window}" in label for label in peaks), peaks

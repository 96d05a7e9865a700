"""The testbed with a real ``redis-server`` (Debian's ``redis-server``; ``.ci/run``
installs it; without it these tests fail, they do not skip).

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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import redis.asyncio as aioredis

from herdsim.config.loading import load_scenario
from herdsim.errors import TestbedError
from herdsim.outputs.compare_dir import load_outputs
from herdsim.testbed import agreement
from herdsim.testbed import run as testbed_run
from herdsim.testbed.jobs import DELAYED, MAIN, WireJob, move_due
from herdsim.testbed.processes import Fleet

SHORT = {"duration": "8s", "downstream.outages.0.start": "3s", "workers.count": 150,
         "workload.rate": 100, "downstream.concurrency": 30}


def leftovers() -> list[Path]:
    return [p for p in Path(tempfile.gettempdir()).glob(f"{testbed_run.WORKDIR_PREFIX}*")
            if (p / "owner.pid").is_file() and (p / "owner.pid").read_text() == str(os.getpid())]


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


@pytest.mark.parametrize("mode", ["sleep", "requeue"])
def test_a_short_real_run_writes_a_run_directory_and_leaves_nothing(tmp_path, mode):
    """Sleep mode holds the job in the worker; requeue parks it with ZADD and the poller
    (every 250 ms) brings it back; max_retries 3 sends some jobs to the DLQ list.

    Not a 100 ms poll: the peak check's window is 100 ms too, and the simulation's polls
    land exactly one window apart, so its busiest window holds one poll's release where
    a real one, a millisecond less late than the one before, holds two (see
    docs/validation.md, where they differ)."""
    sc = load_scenario(Path(__file__).parents[1] / "scenarios" / "testbed.yaml",
                       {**SHORT, "workers.retry_mode": mode, "workers.poll_interval": "250ms",
                        "retry.max_retries": 3})
    out = tmp_path / "real"
    done = testbed_run.testbed(sc, out)
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
    if s["testbed_valid"]:
        assert checks["agrees"].all(), checks.to_string()
    else:
        assert s["testbed_invalid_reason"].startswith("the machine could not keep up")


def _start(tmp_path: Path) -> psutil.Popen:
    exe = shutil.which("herdsim")
    assert exe, "the herdsim console script is not installed (pip install -e .)"
    return psutil.Popen([exe, "testbed", "testbed", "--set", "duration=30s", "--out",
                         str(tmp_path / "out")], cwd=tmp_path, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)


def _running_fleet(proc: psutil.Popen) -> list[psutil.Process]:
    """Wait until redis-server, the server, the producer and both worker processes run."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kids = proc.children(recursive=True)
        if len(kids) >= 5 and any("redis-server" in k.name() for k in kids):
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


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "a worker process crashes"])
def test_a_signal_or_a_crash_stops_every_process_and_removes_the_temp_dir(tmp_path, how):
    proc = _start(tmp_path)
    kids = _running_fleet(proc)
    deadline = time.monotonic() + 60
    while len(_listening(kids)) < 2:  # Redis and the downstream
        assert time.monotonic() < deadline, "Redis and the downstream never listened"
        time.sleep(0.1)
    assert set(_listening(kids)) == {"127.0.0.1"}  # nothing listens beyond loopback
    workdirs = {Path(p) for k in kids for p in k.cmdline()
                if testbed_run.WORKDIR_PREFIX in p and p.endswith(".json")}
    assert workdirs  # the spec files of the children live in the temporary directory
    if how == "a worker process crashes":
        worker = next(k for k in kids if "workers" in " ".join(k.cmdline()))
        worker.kill()
    else:
        proc.send_signal(getattr(signal, how))
    _, err = proc.communicate(timeout=60)
    assert _gone(kids) == []
    assert not any(Path(p).parent.exists() for p in workdirs)
    assert not (tmp_path / "out").exists()
    if how == "a worker process crashes":
        assert proc.returncode == 2
        assert "the workers 0 exited with code -9" in err or \
            "the workers 1 exited with code -9" in err, err
        assert "Traceback" not in err
    else:
        assert proc.returncode == 130, err


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


@pytest.mark.parametrize(("field", "value"), [
    ("workers.count", None), ("downstream.model", "occ"),
    ("downstream.network_delay", {"mean": "1ms"}), ("workers.attempt_overhead", "1ms"),
    ("downstream.discipline", "lifo"), ("downstream.codel", {}),
    ("downstream.admission", {"kind": "aimd"}),
    ("workers.autoscale", {"metric": "queue_depth", "target": 1, "min": 1, "max": 100000}),
    ("client_limiter", {"kind": "aws_adaptive"}), ("retry.bucket", {"rate": 10, "burst": 5})])
def test_what_the_testbed_does_not_emulate_is_refused_naming_the_field(field, value):
    sc = load_scenario(Path(__file__).parents[1] / "scenarios" / "testbed.yaml",
                       {field: value, **({"workers.count": 10} if field ==
                                         "downstream.model" else {})})
    with pytest.raises(TestbedError, match=f"^testbed: {field}: the testbed does not emulate"):
        testbed_run.check_supported(sc)

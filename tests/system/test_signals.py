"""Signals: a killed, interrupted or hung-up herdsim leaves no process, socket or TSDB.

Each test starts the real ``herdsim`` script, waits until it owns children (pool workers,
or Prometheus listening on its port), sends one signal, then counts what is left:
the children's pids still alive, the sockets listening on the port, the working
directories in the temporary folder. The Prometheus tests need Debian's ``prometheus``
package (``.ci/run`` installs it); in CI they fail rather than skip without it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from herdsim.outputs import compare_dir as herdsim_outputs
from herdsim.outputs import prometheus_server

pytestmark = pytest.mark.slow  # real herdsim processes, signals and Prometheus

# An arm takes about 3.5 s on this machine (300 s simulated), so a signal sent 0.5 s
# after the pool starts lands while both arms run (at 60 s an arm took about 1 s, and a
# quiet machine could finish one first and spend the Ctrl-C drawing it).
SLOW = {"name": "slow", "seed": 1, "duration": "300s", "workload": {"rate": 1500},
        "workers": {"count": 200}, "downstream": {"concurrency": 50,
                                                   "service": {"mean": "20ms"}}}
TINY = {"name": "served", "seed": 1, "duration": "2s", "workload": {"rate": 20},
        "workers": {"count": 2}, "downstream": {"concurrency": 2}}


STARTED: list[psutil.Popen] = []  # this test's herdsim processes, killed when it ends


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """A test that fails before its process ends must not leave it running (blocked on
    a pipe nobody reads): kill what is left, children first."""
    yield
    while STARTED:
        proc = STARTED.pop()
        try:
            family = [*proc.children(recursive=True), proc]
        except psutil.NoSuchProcess:
            continue
        for member in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        psutil.wait_procs(family, timeout=5)


def start(tmp: Path, *args: str) -> psutil.Popen:
    """``herdsim *args`` in *tmp*, with a temporary directory of its own (:func:`temp_of`):
    what it leaves there is this test's, whatever else runs on the machine."""
    exe = shutil.which("herdsim")
    assert exe, "the herdsim console script is not installed (pip install -e .)"
    temp_of(tmp).mkdir(exist_ok=True)
    proc = psutil.Popen([exe, *args], cwd=tmp, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True,
                        env=dict(os.environ, TMPDIR=str(temp_of(tmp))))
    STARTED.append(proc)
    return proc


def temp_of(tmp: Path) -> Path:
    """The temporary directory (``TMPDIR``) of the herdsim processes a test starts in *tmp*."""
    return tmp / "tmpdir"


def wait_for(condition, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def left_alive(pids: list[psutil.Process], grace: float = 5.0) -> list[int]:
    """The pids still running after up to *grace* seconds (a zombie is dead: it only
    waits for a reaper, which a container's pid 1 may not be)."""
    def running() -> list[int]:
        alive = []
        for p in pids:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p.pid)
            except psutil.NoSuchProcess:
                pass
        return alive

    deadline = time.monotonic() + grace
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    return running()


@pytest.fixture
def slow_scenario(tmp_path: Path) -> Path:
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(SLOW))
    return tmp_path / "slow.yaml"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_a_killed_driver_leaves_no_pool_worker(tmp_path, slow_scenario, command, signum):
    args = (["compare", str(slow_scenario), "--strategies", "fixed,full_jitter"]
            if command == "compare" else
            ["sweep", str(slow_scenario), "--grid", "workers.count=100,200"])
    driver = start(tmp_path, *args, "--processes", "2", "--out", "out")
    wait_for(lambda: len(children(driver)) >= 2, what="two pool workers")
    workers = children(driver)
    driver.send_signal(signum)
    driver.wait(10)
    assert left_alive(workers) == []


def test_ctrl_c_in_compare_stops_the_running_arms_at_once(tmp_path, slow_scenario):
    driver = start(tmp_path, "compare", str(slow_scenario), "--strategies",
                   "fixed,full_jitter", "--processes", "2", "--out", "out")
    wait_for(lambda: len(children(driver)) >= 2, what="two pool workers")
    time.sleep(0.5)  # the arms are running now
    workers = children(driver)
    began = time.monotonic()
    driver.send_signal(signal.SIGINT)
    assert driver.wait(10) == 130
    assert time.monotonic() - began < 5  # not the seconds the arms would still take
    assert left_alive(workers) == []
    # nothing, or the arms that finished before the signal, whole, the others listed
    if (tmp_path / "out").exists():
        saved = herdsim_outputs.load_outputs(tmp_path / "out")
        assert len(saved.arms) == 1 and len(saved.unfinished) == 1


def listening(port: int) -> list[int]:
    return [c.pid for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]


def workdirs(tmp: Path) -> set[Path]:
    """The Prometheus working folders in the temporary directory of *tmp*'s processes."""
    return set(temp_of(tmp).glob(f"{prometheus_server.WORKDIR_PREFIX}*"))


def ready(port: int) -> bool:
    """Prometheus on *port* answers /-/ready with 200 (it listens before it is ready)."""
    try:
        with prometheus_server.LOOPBACK.open(f"http://127.0.0.1:{port}/-/ready",
                                             timeout=2) as response:
            return response.status == 200
    except OSError:  # refused, reset, or an HTTP error such as 503 while it starts
        return False


def serve(tmp: Path, run_dir: Path, port: int) -> psutil.Popen:
    server = start(tmp, "prometheus", str(run_dir), "--port", str(port))
    wait_for(lambda: ready(port) or server.poll() is not None, 60, "prometheus")
    assert server.poll() is None, server.stderr.read()
    return server


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    import herdsim

    return herdsim.save(herdsim.run(herdsim.load_scenario(TINY)), tmp_path / "run")


@pytest.mark.requires("prometheus", "promtool")
def test_hup_stops_prometheus_and_the_port_can_be_reused_at_once(tmp_path, run_dir):
    port = prometheus_server.free_port()
    server = serve(tmp_path, run_dir, port)
    assert len(workdirs(tmp_path)) == 1  # the folder this test looks at is the one used
    prometheus = children(server)
    # a finished HTTP exchange leaves a TIME_WAIT socket on the port
    prometheus_server.LOOPBACK.open(f"http://127.0.0.1:{port}/-/ready", timeout=5).read()
    server.send_signal(signal.SIGHUP)  # to Prometheus, HUP would mean "reload"
    assert server.wait(20) == 0
    assert left_alive(prometheus) == [] and listening(port) == []
    assert workdirs(tmp_path) == set()
    again = serve(tmp_path, run_dir, port)  # the same port, right away
    again.send_signal(signal.SIGTERM)
    assert again.wait(20) == 0 and listening(port) == []


@pytest.mark.requires("prometheus", "promtool")
def test_sigkill_leaves_no_prometheus_and_the_next_start_clears_its_tsdb(tmp_path, run_dir):
    port = prometheus_server.free_port()
    server = serve(tmp_path, run_dir, port)
    prometheus = children(server)
    server.send_signal(signal.SIGKILL)
    server.wait(10)
    assert left_alive(prometheus) == [] and listening(port) == []
    stale = workdirs(tmp_path)
    assert len(stale) == 1  # the TSDB a killed herdsim could not delete
    cleared = prometheus_server.clear_stale(temp_of(tmp_path))
    assert stale == set(cleared) and not workdirs(tmp_path)


def test_children_die_with_a_parent_killed_before_they_were_told(tmp_path):
    """The parent-death signal is armed even if the parent dies first (a race)."""
    code = ("import os, time; from herdsim.system.children import die_with_parent\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    die_with_parent(); time.sleep(60); os._exit(0)\n"
            "print(pid, flush=True); time.sleep(60)\n")
    parent = psutil.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(parent.stdout.readline()))
    time.sleep(0.3)
    parent.kill()
    parent.wait(10)
    assert left_alive([child]) == []


# -- saves: every signal that ends a save leaves the whole result or nothing ----------------

BLOCKED_SAVE = """\
import pathlib, sys, time
from herdsim.outputs import compare_dir
def blocked(*args, **kwargs):  # the save is under way: its staging exists
    pathlib.Path("saving").write_text("")
    time.sleep(60)
compare_dir.save_figures = blocked
from herdsim.cli import main
sys.argv = ["herdsim", *sys.argv[1:]]
main()
"""


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def blocked_save(tmp: Path, *args: str) -> psutil.Popen:
    """``herdsim *args`` stopped inside its save (figures are drawn last, into staging)."""
    (tmp / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    proc = psutil.Popen([sys.executable, "-c", BLOCKED_SAVE, *args], cwd=tmp,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (tmp / "saving").exists() or proc.poll() is not None, 60, "the save")
    assert proc.poll() is None, proc.stderr.read()
    (tmp / "saving").unlink()
    return proc


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
@pytest.mark.parametrize("command", ["run", "plot"])
def test_a_signal_during_a_save_leaves_nothing_half_written(tmp_path, signum, command):
    if command == "plot":
        (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
        subprocess.run([sys.executable, "-m", "herdsim", "run", "tiny.yaml", "--out", "out",
                        "-q"], cwd=tmp_path, check=True)
        before = sorted(p.name for p in (tmp_path / "out").iterdir())
        proc = blocked_save(tmp_path, "plot", "out", "--format", "png")
    else:
        proc = blocked_save(tmp_path, "run", "tiny.yaml", "--out", "out", "-q")
    assert hidden(tmp_path) or hidden(tmp_path / "out")  # staging exists now
    proc.send_signal(signum)
    assert proc.wait(20) == 128 + signum  # as a shell reports a signal
    assert "Traceback" not in proc.stderr.read()
    assert hidden(tmp_path) == []
    if command == "plot":  # the run folder as it was, no staging inside
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before
    else:
        assert not (tmp_path / "out").exists()


def test_staging_of_a_killed_save_is_cleared_by_the_next_writer(tmp_path):
    from herdsim.outputs import atomic

    proc = blocked_save(tmp_path, "run", "tiny.yaml", "--out", "out", "-q")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    stale = hidden(tmp_path)
    assert stale and all(name.startswith(atomic.STAGING) for name in stale)
    alive_owner = tmp_path / f"{atomic.STAGING}{os.getpid()}-mine"
    alive_owner.mkdir()  # a save still running (this process) is left alone
    subprocess.run([sys.executable, "-m", "herdsim", "run", "tiny.yaml", "--out", "next", "-q"],
                   cwd=tmp_path, check=True)
    assert hidden(tmp_path) == [alive_owner.name]
    assert (tmp_path / "next" / "checksums.json").is_file()


def test_an_interruption_survives_being_rebuilt_from_its_args():
    """A worker process's Interrupted travels back pickled (rebuilt as cls(*args)) and the
    engine re-raises a failed event the same way: rebuilding it gives the same signal, not
    a ValueError ("'SIGTERM' is not a valid Signals", seen on Ctrl-C during a compare)."""
    import pickle
    import signal as signals_module

    from herdsim.system.signals import Interrupted

    original = Interrupted(signals_module.SIGTERM)
    for rebuilt in (type(original)(*original.args), pickle.loads(pickle.dumps(original))):
        assert isinstance(rebuilt, KeyboardInterrupt)
        assert rebuilt.signum == signals_module.SIGTERM and str(rebuilt) == "SIGTERM"

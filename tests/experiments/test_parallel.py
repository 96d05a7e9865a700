"""A failing arm ends a comparison or a sweep, never hangs it.

An arm that raises, in this process, in a pool worker or on a Dask worker, ends the
command with one line naming the arm and the cause (exit code 2 when the cause is the
user's, a herdsim error; 1 for a bug), stops the other arms at once (no process left), and
keeps the arms finished before it as Ctrl-C does. The failures are injected: a user's
strategy (:class:`Flaky`, by import path) that raises for one varied value and holds its
worker for an hour (a sleep: no CPU) for another, or the engine's ``run`` patched to raise
(a bug; forked pool workers inherit the patch).

Before the fix, pool workers inherited the CLI's SIGTERM handler, so stopping them raised
an exception in the arm they ran, which the pool caught, and they went on to the next arm:
the error line came, then the command hung on the held arm (parent and workers asleep).

Budget: about a minute on a loaded 2-core machine, a third of it a Dask cluster's start.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import tiny

import herdsim
from herdsim.errors import TaskError
from herdsim.experiments import compare as compare_module
from herdsim.experiments.compare import Failed
from herdsim.experiments.parallel import imap_unordered
from herdsim.outputs.compare_dir import load_outputs
from herdsim.policies.backoff import Strategy
from herdsim.system import signals

FAIL, HOLD, FINE = 0.07, 0.04, 0.05  # retry.base of the arm that raises, holds, finishes
HELD_FOR = 3600.0  # seconds the held arm would keep its worker
BOUND = 60.0  # seconds any command here may take; the held arm alone would take HELD_FOR
TESTS = Path(__file__).resolve().parent  # this module; its parent holds conftest.py


class Flaky(Strategy):
    """Raises for base 70 ms; holds its worker for an hour for base 40 ms (asleep, so a
    hang costs no CPU, as in the report); otherwise a fixed sleep of base."""

    def sleep(self, attempt, prev, rng):
        if math.isclose(self.base, FAIL):
            raise RuntimeError("kaboom")
        if math.isclose(self.base, HOLD):
            time.sleep(HELD_FOR)
        return self.base


class Stubborn(Flaky):
    """:class:`Flaky`, but the held arm first ignores SIGTERM (as code of a user's may):
    only a kill stops its worker."""

    def sleep(self, attempt, prev, rng):
        if math.isclose(self.base, HOLD):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return super().sleep(attempt, prev, rng)


class NeedsTwo(Exception):
    """An exception that pickles but cannot be rebuilt from its args (a pool used to lose
    it as BrokenProcessPool)."""

    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


FLAKY = f"{__name__}:Flaky"


def scenario() -> dict:
    """tiny under :class:`Flaky` with a blip at 0.2 s, so every arm calls it early."""
    return tiny(retry={"strategy": FLAKY},
                downstream={"outages": [{"start": "0.2s", "duration": "200ms"}]})


def bases(*values: float) -> list[str]:
    return [f"{round(v * 1000)}ms" for v in values]


# -- the Python API ------------------------------------------------------------------------


@pytest.mark.parametrize("processes", [1, 2])
def test_a_user_error_in_an_arm_names_the_arm_and_keeps_the_finished(processes):
    """Serially the arm before the failing one finished and is kept whole; in a pool it
    may not have, and the held arm is never among the finished."""
    sc = herdsim.load_scenario(scenario())
    order = (FINE, FAIL, HOLD) if processes == 1 else (HOLD, FAIL, FINE)
    before = psutil.Process().children(recursive=True)
    threads = set(threading.enumerate())
    began = time.monotonic()
    with pytest.raises(Failed) as failed:
        herdsim.compare(sc, vary={"retry.base": bases(*order)}, processes=processes,
                        progress=False)
    assert time.monotonic() - began < BOUND
    # the pool's threads are done: none left to race the interpreter's exit
    assert set(threading.enumerate()) <= threads
    error = failed.value
    assert isinstance(error, herdsim.HerdsimError) and error.user and error.exit_code == 2
    assert str(error).startswith("arm 'Flaky, retry.base=70ms': strategy ")
    assert "RuntimeError: kaboom" in str(error) and "\n" not in str(error)
    assert "kaboom" in str(error.__cause__)  # the task's traceback, for a Python user
    kept = error.comparison
    if processes == 1:
        assert [a.label for a in kept.arms] == ["Flaky, retry.base=50ms"]
        assert kept.unfinished == ["Flaky, retry.base=70ms", "Flaky, retry.base=40ms"]
    else:
        assert kept is None or [a.label for a in kept.arms] == ["Flaky, retry.base=50ms"]
    assert _alive([p for p in psutil.Process().children(recursive=True)
                   if p not in before]) == []


def test_a_worker_that_ignores_sigterm_is_killed(tmp_path):
    """Stopping the pool kills a worker still alive after the grace (the held arm ignores
    SIGTERM here): the error comes within the bound and no worker is left."""
    sc = herdsim.load_scenario(scenario(), {"retry.strategy": f"{__name__}:Stubborn"})
    before = psutil.Process().children(recursive=True)
    began = time.monotonic()
    with pytest.raises(Failed, match="arm 'Stubborn, retry.base=70ms': strategy "):
        herdsim.compare(sc, vary={"retry.base": bases(HOLD, FAIL)}, processes=2,
                        progress=False)
    assert time.monotonic() - began < BOUND
    assert _alive([p for p in psutil.Process().children(recursive=True)
                   if p not in before]) == []


def sigterm_is_default(_: object) -> bool:
    return signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_pool_workers_die_on_sigterm_whatever_the_driver_handles():
    """The CLI turns SIGTERM into an exception (as Ctrl-C); a forked pool worker must not
    inherit that, or stopping it only raises in its arm and it takes the next one."""
    with signals.as_interrupt():
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
        answers = [ok for _, ok in imap_unordered(sigterm_is_default, range(4), processes=2)]
    assert answers == [True] * 4


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("raised", [ZeroDivisionError("division by zero"), NeedsTwo(1, 2)])
def test_a_bug_in_an_arm_names_the_arm_the_cause_and_where(monkeypatch, processes, raised):
    """The engine raising for one arm (the second of two, replication 1 of 2), even an
    exception that cannot cross a process boundary, is one error naming the arm, the
    exception, its message and the line that raised it; a bug, so exit code 1."""
    real = compare_module.run

    def run(sc, **kwargs):
        if sc.workers.count == 7 and sc.seed == 2:
            raise raised
        return real(sc, **kwargs)

    monkeypatch.setattr(compare_module, "run", run)  # pool workers fork with it
    sc = herdsim.load_scenario(tiny())
    with pytest.raises(TaskError) as failed:
        herdsim.compare(sc, vary={"workers.count": [5, 7]}, replications=2,
                        processes=processes, progress=False)
    error = failed.value
    assert not error.user and error.exit_code == 1 and error.cause == type(raised).__name__
    assert str(error) == (f"arm 'exponential, workers.count=7', replication 1: "
                          f"{type(raised).__name__}: {raised} (a bug, raised at {error.where})")
    assert error.where.startswith(f"{__file__}:") and error.where.endswith(" in run")


def test_a_bug_in_a_sweep_task_names_the_task_and_keeps_the_finished(monkeypatch, tmp_path):
    """``herdsim.sweep``: the task of the second cell raises; one error names it (id,
    strategy, cell, replication), and the first cell's task stays written."""
    from herdsim.experiments import sweep as sweep_module

    real = sweep_module.run

    def run(sc, **kwargs):
        if sc.workers.count == 7:
            raise KeyError("tier")
        return real(sc, **kwargs)

    monkeypatch.setattr(sweep_module, "run", run)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny()))
    with pytest.raises(TaskError) as failed:
        herdsim.sweep(tmp_path / "tiny.yaml", ["workers.count=5,7,9"], out=tmp_path / "out",
                      processes=1)
    assert str(failed.value).startswith(
        "task c00001-a00-r0000 (exponential, workers.count=7, replication 0): KeyError: "
        "'tier' (a bug, raised at ")
    assert [p.name for p in (tmp_path / "out" / "tasks").iterdir()] == ["c00000-a00-r0000.json"]


# -- the command line ----------------------------------------------------------------------


def herdsim_cli(tmp: Path, *args: str, code: str = "") -> psutil.Popen:
    """``herdsim *args`` in *tmp* (*code* runs first, e.g. a patch), with the tests folder
    importable (for :class:`Flaky`) by the CLI, its pool workers and Dask's."""
    (tmp / "flaky.yaml").write_text(yaml.safe_dump(scenario()))
    (tmp / "tiny.yaml").write_text(yaml.safe_dump(tiny()))
    path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
    main = f"{code}\nfrom herdsim.cli import main\nimport sys\nsys.argv[0] = 'herdsim'\nmain()"
    return psutil.Popen([sys.executable, "-c", main, *args], cwd=tmp, text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        env=dict(os.environ, PYTHONPATH=path))


def finish(proc: psutil.Popen) -> tuple[int, str, list[psutil.Process]]:
    """Wait (at most BOUND seconds) for *proc*, noting every child it had; its exit code,
    its stderr, and its children."""
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + BOUND
    while proc.poll() is None:
        with contextlib.suppress(psutil.NoSuchProcess):
            seen.update({c.pid: c for c in proc.children(recursive=True)})
        if time.monotonic() > deadline:
            for process in [*seen.values(), proc]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            pytest.fail(f"still running after {BOUND} s: {proc.stderr.read()}")
        time.sleep(0.05)
    return proc.returncode, proc.stderr.read(), list(seen.values())


def _alive(processes: list[psutil.Process], grace: float = 5.0) -> list[int]:
    """The pids still running after up to *grace* seconds (a zombie only awaits a reaper)."""
    def running() -> list[int]:
        alive = []
        for p in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p.pid)
        return alive

    deadline = time.monotonic() + grace
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    return running()


@pytest.mark.slow
def test_cli_compare_serial_one_line_exit_2_and_the_finished_arm_saved(tmp_path):
    proc = herdsim_cli(tmp_path, "compare", "flaky.yaml", "--vary",
                       f"retry.base={','.join(bases(FINE, FAIL, HOLD))}", "--processes", "1",
                       "--out", "out", "-q")
    code, stderr, _ = finish(proc)
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith(
        "error: arm 'Flaky, retry.base=70ms': strategy ")
    assert "RuntimeError: kaboom; 1 finished arm saved in out" in stderr
    saved = load_outputs(tmp_path / "out")
    assert [a.label for a in saved.arms] == ["Flaky, retry.base=50ms"]
    assert saved.unfinished == ["Flaky, retry.base=70ms", "Flaky, retry.base=40ms"]


@pytest.mark.slow
def test_cli_compare_pool_ends_at_once_and_leaves_no_worker(tmp_path):
    """The held arm runs in one worker while the other fails: the command ends within the
    bound (before the fix: the error line, then a hang), every worker dead."""
    proc = herdsim_cli(tmp_path, "compare", "flaky.yaml", "--vary",
                       f"retry.base={','.join(bases(HOLD, FAIL, FINE))}", "--processes", "2",
                       "--out", "out", "-q")
    code, stderr, workers = finish(proc)
    assert code == 2  # (the workers may come and go between two looks at the children)
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("error: arm 'Flaky, retry.base=70ms': strategy ")
    assert _alive(workers) == []
    if (tmp_path / "out").exists():  # the 50 ms arm, if it finished before the failure
        assert [a.label for a in load_outputs(tmp_path / "out").arms] == [
            "Flaky, retry.base=50ms"]


@pytest.mark.slow
def test_cli_compare_bug_in_a_pool_worker_is_one_line_exit_1(tmp_path):
    patch = ("from herdsim.experiments import compare\n"
             "real = compare.run\n"
             "def run(sc, **kw):\n"
             "    if sc.workers.count == 7:\n"
             "        raise KeyError('tier')\n"
             "    return real(sc, **kw)\n"
             "compare.run = run\n")
    proc = herdsim_cli(tmp_path, "compare", "tiny.yaml", "--vary", "workers.count=5,7,9",
                       "--processes", "2", "--out", "out", "-q", code=patch)
    code, stderr, workers = finish(proc)
    assert code == 1 and _alive(workers) == []
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith("error: arm 'exponential, workers.count=7': KeyError: 'tier' "
                             "(a bug, raised at <string>:")


@pytest.mark.slow
def test_cli_sweep_pool_names_the_task_and_keeps_what_finished(tmp_path):
    """Serially the first cell finishes and stays saved (resumable); in a pool the held
    cell is stopped at once."""
    proc = herdsim_cli(tmp_path, "sweep", "flaky.yaml", "--grid",
                       f"retry.base={','.join(bases(FINE, FAIL, HOLD))}", "--processes", "1",
                       "--out", "serial", "-q")
    code, stderr, _ = finish(proc)
    assert code == 2 and stderr.count("\n") == 1
    assert stderr.startswith(f"error: task c00001-a00-r0000 ({FLAKY}, retry.base={FAIL}, "
                             "replication 0): strategy ")
    assert "kaboom; 1 of 3 tasks are saved in serial" in stderr
    assert [p.name for p in (tmp_path / "serial" / "tasks").iterdir()] == [
        "c00000-a00-r0000.json"]
    proc = herdsim_cli(tmp_path, "sweep", "flaky.yaml", "--grid",
                       f"retry.base={','.join(bases(HOLD, FAIL))}", "--processes", "2",
                       "--out", "pool", "-q")
    code, stderr, workers = finish(proc)
    assert code == 2 and stderr.count("\n") == 1 and "task c00001-a00-r0000" in stderr
    assert _alive(workers) == [] and not (tmp_path / "pool").exists()


@pytest.mark.slow
def test_cli_sweep_on_a_local_dask_cluster_ends_at_once(tmp_path):
    """On Dask workers (processes of a LocalCluster) too: one line, nothing of Dask's own
    logging, every worker process gone, the held task stopped."""
    proc = herdsim_cli(tmp_path, "sweep", "flaky.yaml", "--grid",
                       f"retry.base={','.join(bases(HOLD, FAIL))}", "--scheduler", "local",
                       "--processes", "2", "--out", "dask", "-q")
    code, stderr, workers = finish(proc)
    assert code == 2 and len(workers) >= 2 and _alive(workers) == []
    assert stderr.count("\n") == 1
    assert stderr.startswith(f"error: task c00001-a00-r0000 ({FLAKY}, retry.base={FAIL}")


@pytest.mark.slow
def test_a_scheduler_that_accepts_and_never_answers_is_one_error_in_bounded_time(
        monkeypatch):
    """Every network handshake has a deadline: a peer that accepts the connection and
    never says a word (not a Dask scheduler) ends the call, it does not hang it."""
    import socket

    from herdsim.errors import ExecutorError
    from herdsim.experiments import parallel

    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT", "1s")
    monkeypatch.setattr(parallel, "HANDSHAKE_TIMEOUT", 2.0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list = []
    stop = threading.Event()

    def accept() -> None:  # accept every connection, answer nothing
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    outcome: list = []

    def sweep() -> None:
        try:
            list(imap_unordered(abs, [1, 2], scheduler=address))
        except ExecutorError as exc:
            outcome.append(str(exc))

    caller = threading.Thread(target=sweep, daemon=True)
    started = time.monotonic()
    caller.start()
    caller.join(30)
    took = time.monotonic() - started
    stop.set()
    for conn in accepted:
        conn.close()
    listener.close()
    assert not caller.is_alive(), "the handshake has no deadline"
    assert accepted, "the test's peer was never reached"
    assert outcome and outcome[0].startswith(f"--scheduler {address}: no Dask handshake")
    assert took < 10  # 2 s of handshake, plus Dask's import

"""Shared fixtures: a factory of tiny scenario dicts, the bundled scenarios' folder, and
the ``requires`` marker for tests that need a Debian package."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import pytest
from simpy import Interrupt

os.environ.setdefault("MPLBACKEND", "Agg")

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"

# command -> (the names it goes by on PATH, the Debian package that installs it)
COMMANDS = {
    "redis-server": (("redis-server",), "redis-server"),
    "prometheus": (("prometheus",), "prometheus"),
    "promtool": (("promtool",), "prometheus"),
    "chromium": (("chromium", "chromium-browser"), "chromium"),
}


def command_path(command: str) -> str | None:
    """Where *command* (a key of ``COMMANDS``) is on PATH, or None."""
    names, _ = COMMANDS[command]
    return next((found for found in map(shutil.which, names) if found), None)


def under_ci() -> bool:
    """``CI=true`` (or any value but empty, ``0`` or ``false``) in the environment."""
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false"}


def require(*commands: str) -> None:
    """Skip the calling test unless every command is on PATH, naming the Debian packages
    and the ``apt-get install`` line; under CI, fail instead, so CI never skips one."""
    missing = [command for command in commands if command_path(command) is None]
    if not missing:
        return
    packages = sorted({COMMANDS[command][1] for command in missing})
    message = (f"{' and '.join(missing)} not found on PATH: needs the Debian package"
               f"{'s' if len(packages) > 1 else ''} {', '.join(packages)} "
               f"(apt-get install {' '.join(packages)})")
    if under_ci():
        pytest.fail(f"{message}; under CI a missing package fails the test", pytrace=False)
    pytest.skip(message)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The notebooks (nbmake's items, next to tests/) run end to end: mark them ``slow``."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.requires("redis-server", ...)``: checked before any fixture runs."""
    for mark in item.iter_markers("requires"):
        require(*mark.args)

TINY = {
    "name": "tiny",
    "seed": 1,
    "duration": "2s",
    "workload": {"arrivals": "poisson", "rate": 50},
    "workers": {"count": 10},
    "downstream": {"concurrency": 4, "service": {"distribution": "exponential", "mean": "20ms"}},
    "retry": {"strategy": "exponential", "base": "50ms", "cap": "1s", "max_retries": 3},
}


def _merge(into: dict, changes: dict) -> dict:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def tiny(**changes) -> dict:
    """A small valid scenario dict (2 s, 10 workers), with *changes* merged section by section."""
    return _merge(copy.deepcopy(TINY), changes)


def overloaded(mix: dict | None = None, limit: int | None = None, **down) -> dict:
    """300 jobs/s with two retries against 10 slots of 50 ms (200/s): overloaded all run
    long (20 s), with the criticality *mix* (none: no classes) and a waiting room of
    *limit*; *down*: more of the downstream's fields."""
    workload = {"rate": 300, **({"criticality": mix} if mix else {})}
    return tiny(duration=20, seed=5, workload=workload, workers={"count": 100},
                retry={"max_retries": 2},
                downstream={"concurrency": 10, "queue_limit": limit, "timeout": 1.0,
                            "service": {"distribution": "exponential", "mean": 0.05},
                            **down})


def play_calls(env, downstream, starts: dict[str, float], until: float,
               timeout: float | None) -> dict:
    """One caller process per name makes one call to *downstream* at its time (as a worker
    does: a fast failure at once, else the call's event and ``finish``), each with the
    client *timeout*; runs *env* to *until* and returns ``{name: (time heard, outcome)}``."""
    log: dict[str, tuple[float, int]] = {}

    def caller(name: str, at: float):
        yield env.timeout(at)
        call = downstream.call(env.active_process, timeout)
        if call.__class__ is int:
            log[name] = (env.now, call)
            return
        try:
            outcome = downstream.finish(call, (yield call.event))
        except Interrupt as failure:
            outcome = failure.cause
        log[name] = (round(env.now, 9), outcome)

    for name, at in starts.items():
        env.process(caller(name, at))
    env.run(until=until)
    return log


def assert_every_job_ends_in_one_place(sim, run):
    """Every job that arrived is in exactly one place, counted from the model (not from
    the summary's ``pending = submitted - succeeded - dead - merged``): finished once (the
    recorder's finish rows: succeeded, dead-lettered or merged into its key's job) or
    still held (the queues, a worker, a caller); and the per-job table and the summary
    count the same. *run* is what ``sim.run()`` returned; returns its ``Result``."""
    from herdsim.results.result import Result

    finished = list(sim.recorder.finish_id)  # read before the jobs frame takes them over
    res = Result.from_finished(run)
    held = [job.id for job in sim.pending_jobs()]
    assert len(set(finished)) == len(finished), "a job finished twice"
    assert len(set(held)) == len(held), "a job is in two places at once"
    assert sorted(finished + held) == list(range(len(sim.recorder.arrivals))), \
        "a job was lost, or finished and still held"
    outcomes = res.jobs["outcome"].value_counts()
    assert res.summary["jobs_pending"] == outcomes.get("pending", 0) == len(held)
    assert res.summary["jobs_succeeded"] + res.summary["jobs_dead_lettered"] \
        + res.summary["jobs_merged"] == len(finished)
    assert res.summary["jobs_merged"] == outcomes.get("merged", 0)
    assert res.summary["jobs_succeeded"] == outcomes.get("succeeded", 0)
    assert res.summary["jobs_dead_lettered"] == outcomes.get("dead_lettered", 0)
    return res


@pytest.fixture(scope="session")
def make_scenario():
    """``make_scenario(workload={"rate": 5}, ...)``: a tiny valid scenario dict.

    Session-scoped so that Hypothesis tests may use it.
    """
    return tiny


@pytest.fixture(scope="session")
def scenarios_dir() -> Path:
    """The repository's ``scenarios/`` folder."""
    return SCENARIOS


ARRIVALS_END = 4.0  # arrivals stop here; the runs go on until everything has ended


def graph(**changes) -> dict:
    """Workers -> front -> api (x2 in parallel) -> db (x3 in parallel); arrivals for 4 s."""
    data = {
        "name": "graph", "duration": "40s", "seed": 3,
        "workload": {"rate": 20, "profile": [{"at": 0, "rate": 20},
                                             {"at": ARRIVALS_END, "rate": 0}]},
        "workers": {"count": 50},
        "retry": {"strategy": "full_jitter", "base": "100ms", "max_retries": 1},
        "downstream": {"name": "front", "concurrency": 200, "service": {"mean": "2ms"},
                       "calls": [{"service": "api", "count": 2,
                                  "retry": {"strategy": "full_jitter", "base": "50ms",
                                            "max_retries": 2}}]},
        "services": {
            "api": {"concurrency": 400, "service": {"mean": "2ms"},
                    "calls": [{"service": "db", "count": 3,
                               "retry": {"strategy": "full_jitter", "base": "20ms",
                                         "max_retries": 1}}]},
            "db": {"concurrency": 200, "service": {"mean": "5ms"}},
        },
    }
    for path, value in changes.items():
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(leaf) if isinstance(node, list) else leaf] = value
    return data

"""``--timings``: where a command's CPU and wall time went, phase by phase.

The numbers are measurements, so the tests check what must hold of any measurement: phases
are disjoint (what they do not cover, ``other``, is never negative), each is at least zero,
the total is this process's CPU from its start (no more than the operating system counted
for the whole process) and timing never touches stdout.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import tiny

from herdsim.system import timings

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^│\s*(.+?)\s*│\s*([-\d.]+)\s*│\s*-?\d+%\s*│\s*([-\d.–]+)\s*│")


def rows(stderr: str) -> dict[str, tuple[float, float | None]]:
    found = {}
    for line in stderr.splitlines():
        match = ROW.match(line.strip())
        if match:
            wall = None if match.group(3) == "–" else float(match.group(3))
            found[match.group(1).split(" ×")[0]] = (float(match.group(2)), wall)
    return found


def herdsim(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float, float]:
    """A real process (start-up is part of what is measured): its result, CPU and wall."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "herdsim", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done, cpu, wall


@pytest.mark.slow
def test_run_timings_cover_every_phase_once_and_add_up(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny(duration="3s")))
    done, cpu, wall = herdsim(tmp_path, "run", "s.yaml", "--out", "out", "--timings",
                              "--json")
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # stdout is the summary alone
    found = rows(done.stderr)
    for name in ("start-up and imports", "load and check the scenario", "simulate",
                 "analyse: frames and summary", "save timeseries.csv", "save sleeps.csv",
                 "save jobs.parquet", "save peak_rate.csv", "draw timeline: compose",
                 "draw timeline: render timeline.png", "draw landing: render landing.png",
                 "save checksums.json, publish the directory", "other", "total"):
        assert name in found, f"{name!r} missing from {sorted(found)}"
    total_cpu, total_wall = found.pop("total")
    assert all(c >= 0 for c, _ in found.values()), found  # 'other' >= 0: no phase nests
    assert sum(c for c, _ in found.values()) == pytest.approx(total_cpu, abs=len(found) * 5e-4)
    # the total is this process's CPU: the OS counted at least that much (it also counts
    # the exit after the table); start-up is a real share of it
    assert total_cpu <= cpu + 0.01
    assert found["start-up and imports"][0] > 0.05 * total_cpu
    if total_wall is not None:  # Linux: wall from the process's start
        assert 0 < total_wall <= wall + 0.02


@pytest.mark.slow
def test_without_the_flag_nothing_is_timed(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny()))
    done, _, _ = herdsim(tmp_path, "run", "s.yaml", "--out", "out", "-q")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""
    assert not timings.active()


@pytest.mark.slow
def test_compare_timings_name_each_figure(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny()))
    done, _, _ = herdsim(tmp_path, "compare", "s.yaml", "--strategies", "fixed,full_jitter",
                         "--out", "out", "--processes", "1", "-q", "--timings")
    assert done.returncode == 0, done.stderr
    found = rows(done.stderr)
    for kind in ("timeline", "landing", "sleeps", "kpis"):
        assert f"draw {kind}: render {kind}.png" in found, sorted(found)
    assert "simulate" in found and found["other"][0] >= 0


def test_phases_are_disjoint_and_off_costs_nothing():
    assert not timings.active()
    with timings.phase("ignored"):  # off: no row, no error
        pass
    timings.start()
    try:
        with timings.phase("outer"):
            spin(0.03)
            for _ in range(2):  # a phase met twice is one row, counted twice
                with timings.phase("inner"):
                    spin(0.05)
    finally:
        found = timings.stop()
    names = [row.name for row in found]
    assert names == [timings.STARTUP, "outer", "inner", "other", "total"]
    by_name = {row.name: row for row in found}
    assert by_name["inner"].count == 2 and by_name["inner"].cpu >= 0.1
    # the outer phase does not count the inner one: about its own 0.03 s, not 0.13 s
    assert 0.03 <= by_name["outer"].cpu < 0.08
    assert by_name["other"].cpu >= 0
    assert by_name["total"].cpu == pytest.approx(sum(row.cpu for row in found[:-1]))
    assert not timings.active()


def spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


IMPORTED = time.perf_counter()


def test_since_process_start_is_this_processs_age():
    age = timings.since_process_start()
    if age is None:  # not Linux
        return
    assert age >= time.perf_counter() - IMPORTED  # the process is older than this module
    # psutil's clock: the boot time it adds is whole seconds
    assert age == pytest.approx(time.time() - psutil.Process().create_time(), abs=1.05)

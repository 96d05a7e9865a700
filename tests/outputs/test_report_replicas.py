"""The report's per-replica section (``outputs/report/replicas.py``): a row per arm and
replica, the worst replicas of a large fleet with a note, nothing without replicas."""

from __future__ import annotations

import re

from conftest import tiny

import herdsim
from herdsim.config.loading import validate
from herdsim.outputs.report import replicas


def compare(n, outage=None):
    down = {"replicas": n, "concurrency": 2, "timeout": 5.0,
            "service": {"distribution": "exponential", "mean": 0.05},
            "outages": [outage] if outage else []}
    sc = validate(tiny(duration=10, workload={"rate": 60}, workers={"count": 20},
                       downstream=down))
    return herdsim.compare(sc, ["full_jitter", "exponential"], processes=1, progress=False)


def rows(section):
    return re.findall(r"<tr>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>(\d+)</td>",
                      section)


def test_a_row_per_arm_and_replica():
    found = rows(replicas.section(compare(3)))
    assert [(arm, int(i)) for arm, _, i in found] == [
        (arm, i) for arm in ("full_jitter", "exponential") for i in range(3)]


def test_a_large_fleet_shows_its_worst():
    """Replica 13 of 15 is down half the run: it is among the rows shown, and the note
    says how many were left out."""
    c = compare(15, {"mode": "down", "start": 2, "duration": 5, "replica": 13})
    section = replicas.section(c)
    found = rows(section)
    assert len(found) == 2 * replicas.SHOWN
    assert all(("13" in {i for a, _, i in found if a == arm}) for arm in
               ("full_jitter", "exponential"))
    assert f"the {replicas.SHOWN} of 15 replicas with the most failures" in section


def test_nothing_without_replicas():
    c = herdsim.compare(validate(tiny()), ["full_jitter"], processes=1, progress=False)
    assert replicas.section(c) == ""

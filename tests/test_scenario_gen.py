"""The generator (``tests/scenario_gen.py``) reaches the whole schema, combined.

A field of the schema or a member of a family that no valid generated scenario ever sets
is a part the generated-scenario tests never run: the check below draws scenarios as the
census does (repaired, valid) and fails naming every field and member none of them
reached, but those in :data:`NOT_DRAWN`, each with its reason. A tier's field counts on
any tier (``downstream.cache.warm`` or ``services.db.cache.warm``), an edge's on any
edge.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from scenario_gen import repaired, scenarios

from herdsim.config.families import FAMILIES
from herdsim.config.scenario import Scenario
from herdsim.config.schema import fields
from herdsim.policies import arrivals, disciplines, downstreams

DRAWS = 600

# Field paths (as :func:`herdsim.config.schema.fields` writes them, a tier's under
# ``downstream.``) the generator leaves out on purpose.
NOT_DRAWN: dict[str, str] = {
    "queue": "the default queue name: a name, nothing simulated reads it",
    "workload.trace.sha256": "a checksum of the trace file: a check, not a mechanism",
    "downstream.name": "a label (drawn null or 'frontend'; null is the default)",
    "description": "text",
    # rare, not unreachable: each is set in a longer census (2,000 draws)
    "downstream.cache.hit_latency.sigma": "four sections deep (a cache's lognormal hit "
                                          "latency): about one scenario in 1,000",
    "downstream.occ.hop_mean": "the occ model's own section, with model: occ",
}

# Family members the draws of the test do not choose, with the reason.
MEMBERS_NOT_DRAWN: dict[tuple[str, str], str] = {
    ("backoff strategy", "decorrelated_jitter"): "one of 14 strategies (and a preset "
                                                 "takes its own): the fixed draws miss "
                                                 "it, a longer census does not",
}

FLAT = {arrivals.FAMILY.tag: arrivals.FAMILY, downstreams.FAMILY.tag: downstreams.FAMILY,
        disciplines.FAMILY.tag: disciplines.FAMILY}


def _tier_path(path: str) -> str:
    """``services.db.cache.warm`` and ``downstream.cache.warm`` as one tier field."""
    parts = path.split(".")
    if parts[0] == "services" and len(parts) > 2:
        return ".".join(["downstream", *parts[2:]])
    return path


def reached(scenario: Scenario, paths: set[str], members: set[tuple[str, str]]) -> None:
    """Add the field paths *scenario* sets (list indices and map keys dropped) and the
    family members it chooses."""
    def walk(obj: Any, prefix: str) -> None:
        if isinstance(obj, BaseModel):
            family = getattr(type(obj), "family", None)
            if family is not None:
                members.add((family.name, getattr(obj, family.tag)))
            for name in obj.model_fields_set:
                paths.add(_tier_path(prefix + name))
                walk(getattr(obj, name), f"{prefix}{name}.")
            for tag, flat in FLAT.items():
                if tag in type(obj).model_fields and isinstance(getattr(obj, tag), str):
                    members.add((flat.name, getattr(obj, tag)))
            if "strategy" in type(obj).model_fields and "max_retries" in type(obj).model_fields:
                members.add(("backoff strategy", obj.strategy))  # type: ignore[attr-defined]
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item, prefix)
        elif isinstance(obj, dict):
            for key, item in obj.items():
                walk(item, f"{prefix}{key}." if prefix == "services." else prefix)

    walk(scenario, "")


def census(draws: int) -> tuple[collections.Counter, collections.Counter, int]:
    """What *draws* generated, repaired scenarios set: (paths, members, valid count)."""
    paths: collections.Counter = collections.Counter()
    members: collections.Counter = collections.Counter()
    valid = [0]

    @settings(max_examples=draws, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        scenario = repaired(data.draw(scenarios()), data.draw)
        if scenario is None:
            return
        valid[0] += 1
        here: set[str] = set()
        chosen: set[tuple[str, str]] = set()
        reached(scenario, here, chosen)
        paths.update(here)
        members.update(chosen)

    draw()
    return paths, members, valid[0]


def schema_paths() -> list[str]:
    """Every field path of the schema, a service's as the top tier's."""
    return sorted({_tier_path(path.replace("services.", "services.*.", 1))
                   if path.startswith("services.") else path
                   for path, _ in fields(Scenario)})


def every_member() -> list[tuple[str, str]]:
    return [(family.name, name) for family in FAMILIES for name in family.names()]


def fresh_census(draws: int) -> tuple[set[str], set[tuple[str, str]], int]:
    """:func:`census` in a fresh interpreter: its derandomized draws are the same whatever
    ran before it (after another Hypothesis search in the same process, the same 600 draws
    chose no equal_jitter where alone they chose it 13 times)."""
    probe = ("import json, sys\n"
             f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
             "from test_scenario_gen import census\n"
             f"paths, members, valid = census({draws})\n"
             "print(json.dumps([sorted(paths), sorted(members), valid]))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    paths, members, valid = json.loads(done.stdout.splitlines()[-1])
    return set(paths), {tuple(m) for m in members}, valid


@pytest.mark.slow
def test_the_generator_sets_every_field_and_chooses_every_member():
    paths, members, valid = fresh_census(DRAWS)
    assert valid > DRAWS // 3, f"only {valid} of {DRAWS} draws were valid"
    never = [p for p in schema_paths() if p not in paths and p not in NOT_DRAWN]
    assert not never, f"never set by a valid generated scenario: {never}"
    unchosen = [m for m in every_member() if m not in members and m not in MEMBERS_NOT_DRAWN]
    assert not unchosen, f"never chosen by a valid generated scenario: {unchosen}"


def test_the_coverage_walk_sees_a_services_field_and_a_flat_member():
    """The walk can fail: a scenario with a cached service, a broker-less LIFO room and
    periodic arrivals reports exactly those, and not a field it leaves unset."""
    import herdsim

    scenario = herdsim.load_scenario({
        "name": "walk", "duration": "2s", "workers": {"count": 4},
        "workload": {"arrivals": "periodic", "clients": 2, "interval": "0.5s"},
        "downstream": {"discipline": "lifo", "calls": [{"service": "db"}]},
        "services": {"db": {"cache": {"size": 5, "keys": {"count": 20}}}}})
    paths: set[str] = set()
    members: set[tuple[str, str]] = set()
    reached(scenario, paths, members)
    assert "downstream.cache.size" in paths  # the service's, as a tier field
    assert "downstream.cache.warm" not in paths
    assert ("arrival source", "periodic") in members
    assert ("waiting-room discipline", "lifo") in members
    assert ("downstream model", "broker") not in members
    assert "downstream.calls.service" in paths

"""What ``herdsim testbed`` and ``herdsim serve`` run for real is an allow-list
(``herdsim/testbed/emulates.py``): every field of the schema is run or refused in one
line, none silently ignored; a member's own declaration decides for a family's member;
and ``serve`` checks its port and host before it listens.

Scenarios with a given field set are drawn from the schema (``tests/scenario_gen.py``),
so a field the schema gains is drawn here without a change, and refused until it is
added to the allow-list on purpose.
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from scenario_gen import for_annotation, for_model, repaired, scenarios

from herdsim.config.families import FAMILIES
from herdsim.config.loading import load_scenario, validate
from herdsim.config.scenario import Scenario
from herdsim.config.schema import field_at, fields, nested, section_type, value_at
from herdsim.errors import TestbedError, UsageError
from herdsim.policies import arrivals, backoff, disciplines, downstreams
from herdsim.policies.family import Family, Member
from herdsim.policies.limiters.fixed import Fixed
from herdsim.testbed import emulates
from herdsim.testbed.emulator import Emulator
from herdsim.testbed.server import listen_on, serve_forever, url_of
from herdsim.testbed.timing import Clock

BUNDLED = Path(__file__).parents[2] / "herdsim" / "scenarios"
BASE = {"name": "t", "duration": 3, "workload": {"rate": 10}, "workers": {"count": 5},
        "downstream": {"timeout": 1}}
DRAWN = settings(max_examples=2, deadline=None, database=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))


def herdsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "herdsim", *args], capture_output=True,
                          text=True, timeout=120)


def refused_keys(scenario: Scenario, downstream_only: bool = False) -> list[str]:
    return [s.key for s, _ in emulates.refusals(scenario, downstream_only)]


def related(a: str, b: str) -> bool:
    """*a* is *b*, or lies above or below it."""
    return a == b or a.startswith(f"{b}.") or b.startswith(f"{a}.")


# -- the graph and the hedge of issue 36: refused in one line, nothing started -----------

@pytest.mark.slow
@pytest.mark.parametrize("command", ["testbed", "serve"])
def test_a_call_graph_is_refused_in_one_line_naming_the_file_and_services(command, tmp_path):
    """layers.yaml's database is down the whole blip: the testbed used to run its top
    tier alone and report real jobs succeeding; serve answered 200. Now: exit 2, one line
    naming the file and ``services``, no output folder, nothing started (it answers at
    once: no Redis, no server was waited for)."""
    out = tmp_path / "out"
    args = [command, "layers"] + (["--out", str(out)] if command == "testbed" else [])
    started = time.monotonic()
    done = herdsim(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "layers.yaml: services: " in lines[0]
    assert "does not emulate a call graph" in lines[0] and "'herdsim run'" in lines[0]
    assert not out.exists() and not done.stdout.strip()
    assert time.monotonic() - started < 60  # a 60 s run was not started


def test_a_hedged_scenario_is_refused_by_the_testbed_naming_hedging():
    """The workers' calls hedged (gRPC A6): the real workers would retry instead."""
    data = yaml.safe_load((BUNDLED / "testbed.yaml").read_text())
    del data["retry"]  # the workers hedge or retry, not both
    data["hedging"] = {"max_attempts": 3, "delay": "50ms"}
    with pytest.raises(TestbedError, match=r"^testbed: hedging: the testbed does not emulate "
                                           r"hedged calls"):
        emulates.check_supported(validate(data))
    emulates.check_supported(validate(data), downstream_only=True)  # serve: the client's


# -- today's denials keep their meaning ----------------------------------------------------

OPEN = {"workers.count": None, "workers.clients": 4}
DENIED = [  # (the field, what the message calls it, any setting it needs)
    ("downstream.model", "the occ model", {"downstream.model": "occ", "workers.count": 10}),
    ("downstream.model", "the broker model", {"downstream.model": "broker",
                                              "workers.count": 10}),
    ("downstream.network_delay", "a network delay", {"downstream.network_delay": {}}),
    ("downstream.request_delay", "a request delay", {"downstream.request_delay": {}}),
    ("downstream.overload.latency_model", "processor sharing",
     {"downstream.overload.latency_model": "continuous"}),
    ("downstream.serve_abandoned", "serving abandoned calls",
     {"downstream.serve_abandoned": True}),
    ("downstream.discipline", "a LIFO waiting room", {"downstream.discipline": "lifo"}),
    ("downstream.codel", "CoDel", {"downstream.codel": {}}),
    ("downstream.shedding", "probabilistic shedding",
     {"downstream.shedding": {"above": 5, "probability": 0.5}}),
    ("downstream.admission", "admission limiter", {"downstream.admission": {"kind": "aimd"}}),
    ("workers.count", "open-loop callers", {"workers.count": None}),
    ("breaker.scope", "per-client breakers",
     {**OPEN, "breaker.enabled": True, "breaker.scope": "client"}),
    ("budget.scope", "per-client budgets", {**OPEN, "budget": {"kind": "ratio",
                                                               "scope": "client"}}),
    ("workers.autoscale", "autoscaler",
     {"workers.autoscale": {"metric": "queue_depth", "target": 1, "max": 1000}}),
    ("client_limiter", "client limiter", {"client_limiter": {}}),
    ("retry.bucket", "a retry bucket", {"retry.bucket": {"rate": 10, "burst": 5}}),
    ("workload.keys", "keys", {"workload.keys": 10}),
]


@pytest.mark.parametrize(("field", "what", "changes"), DENIED, ids=[d[0] for d in DENIED])
def test_what_the_deny_list_refused_is_still_refused_and_said_as_clearly(field, what,
                                                                         changes):
    """The features of the old deny-list (but the attempt overhead): each is refused, in
    the same words; the workers' side only by the testbed (serve emulates the downstream
    alone)."""
    sc = load_scenario(BUNDLED / "testbed.yaml", changes)
    found = {s.where: text for s, text in emulates.refusals(sc)}
    assert field in found and what in found[field], found
    if set(changes) <= {field, "workers.count"}:  # nothing else refused: it is named
        with pytest.raises(TestbedError, match=f"^testbed: {field}: the testbed does not "
                                               "emulate"):
            emulates.check_supported(sc)
    served = {s.where for s, _ in emulates.refusals(sc, downstream_only=True)}
    assert (field in served) == field.startswith("downstream."), served


@pytest.mark.parametrize("overhead", ["3ms", {"distribution": "lognormal", "mean": "3ms",
                                                "sigma": 0.6}])
def test_the_testbed_takes_an_attempt_overhead_as_its_workers_own_turnaround(overhead):
    """A duration or a distribution (what --calibrate fits): the simulation models it,
    the real workers have it (issue 40: the testbed refused it, so its comparison could
    not model the turnaround)."""
    sc = load_scenario(BUNDLED / "testbed.yaml", {"workers.attempt_overhead": overhead})
    assert emulates.refusals(sc) == []


def test_the_bundled_scenarios_the_testbed_ran_before_it_still_runs():
    """The deny-list accepted testbed, outage, breaker, budget, poison, retry_after and
    stacks: the allow-list must not refuse what the testbed has always run."""
    for name in ("testbed", "outage", "breaker", "budget", "poison", "retry_after",
                 "stacks", "brownout"):
        emulates.check_supported(load_scenario(BUNDLED / f"{name}.yaml"))


# -- members: their own declaration decides ------------------------------------------------

@functools.cache  # a walk of the whole schema, asked once per path at collection
def places() -> tuple[tuple[str, Family], ...]:
    """Where each family sits in the schema (``downstream.admission``, …)."""
    return tuple((path, family) for path, field in fields(Scenario)
                 for family in {*nested(field.annotation), *field.metadata}
                 if isinstance(family, Family))


FLAT = {arrivals.FAMILY, downstreams.FAMILY, disciplines.FAMILY, backoff.FAMILY}  # a tag field


def test_every_family_of_the_scenario_has_a_place_the_walk_judges():
    """Each family chosen by a union field sits somewhere the walk sees a member; the flat
    ones (a tag field in a section: ``workload.arrivals``, ``downstream.model``,
    ``downstream.discipline``, ``retry.strategy``) are judged by their field's path."""
    assert {family for _, family in places()} == set(FAMILIES) - FLAT
    assert all(f"{path}" in emulates.RUNS or emulates._refused_place(path)
               for path in ("workload.arrivals", "downstream.model", "downstream.discipline",
                            "retry.strategy"))


@st.composite
def with_member(draw, path: str, member: type[Member]) -> Scenario | None:
    doc = with_value(draw, path, draw(for_model(member, path)))
    if getattr(member, "needs_cache", False):  # a flush: the cache it empties, same tier
        doc["downstream"].setdefault("cache", {"size": 10, "keys": {
            "distribution": "uniform", "count": 20}})
    return repaired(doc, draw)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "member"), [(p, m) for p, f in places() for m in f.members],
                         ids=lambda x: x if isinstance(x, str) else x.name())
@DRAWN
@given(data=st.data())
def test_a_member_is_run_or_refused_as_it_declares(path, member, data):
    """A member that declares ``emulated = False`` is refused where it sits, naming it; one
    that declares True is not (unless its place is refused)."""
    sc = data.draw(with_member(path, member))
    assume(sc is not None and any(s.key == path and isinstance(s.value, member)
                                  for s in emulates.settings(sc)))
    keys = refused_keys(sc)
    if not member.emulated:
        assert path in keys, keys
    elif emulates._refused_place(path) is None:
        assert not any(related(k, path) for k in keys), keys


def test_the_fixed_limit_says_it_is_not_emulated_because_the_emulator_admits_past_it():
    """The declaration is checked against the emulator: with a fixed limit of 1 and 10
    slots, 5 calls at once are all in service. A testbed that enforced the limit would
    hold 1, and could then say ``emulated = True``."""
    sc = validate({**BASE, "downstream": {"concurrency": 10, "service": {
        "distribution": "constant", "mean": "50ms"}, "admission": {"kind": "fixed",
                                                                   "limit": 1}}})

    async def most_at_once() -> int:
        clock = Clock(asyncio.get_running_loop().time())
        emulator = Emulator(sc, clock)
        calls = [asyncio.create_task(emulator.call()) for _ in range(5)]
        await asyncio.sleep(0.01)
        admitted = emulator.busy + len(emulator.waiting)
        await asyncio.gather(*calls)
        return admitted

    enforced = asyncio.run(most_at_once()) <= 1
    assert Fixed.emulated == enforced
    assert "downstream.admission" in refused_keys(sc)


# -- no field is silently ignored -------------------------------------------------------

def _inner(annotation: Any) -> Any:
    """The container (list, dict) of sections a field holds, past Optional and
    Annotated; None for any other field."""
    if section_type(annotation) is None:
        return None
    for candidate in (annotation, *nested(annotation)):
        if typing.get_origin(candidate) in (list, dict):
            return typing.get_origin(candidate)
    return None


# A field valid only beside another (what its type cannot say): that one, set with it.
BESIDE = {"key_skew": ("keys", 10), "lifo_threshold": ("discipline", "adaptive_lifo"),
          # a field (its name, or its path) and what it goes with
          "occ": ("model", "occ"), "broker": ("model", "broker"),
          **dict.fromkeys(["balancer", "outlier_detection", "health_check"], ("replicas", 3)),
          **dict.fromkeys([f"workload.{name}" for name in ("clients", "interval", "offset",
                                                           "restarts")],
                          ("arrivals", "periodic"))}


def with_value(draw, path: str, value: Any) -> dict:
    """:data:`BASE` (closed or open loop) with *value* at *path*: every section on the way
    drawn from the schema (a list's one item, a map's one service)."""
    doc: Any = yaml.safe_load(yaml.safe_dump(BASE))
    doc["workers"]["count"] = draw(st.sampled_from([5, None]))  # None: open loop
    node, model, parts, at = doc, Scenario, path.split("."), ""
    for i, part in enumerate(parts):
        at = f"{at}.{part}".lstrip(".")  # where it sits: with an index, a service's name
        field = model.model_fields[part]
        beside = BESIDE.get(at, BESIDE.get(part))
        if beside is not None:
            node.setdefault(*beside)
        if i == len(parts) - 1:
            listed = _inner(field.annotation) is list and not isinstance(value, list)
            node[part] = [value] if listed else value
            break
        model = section_type(field.annotation)
        kind = _inner(field.annotation)
        if kind is list:
            at += ".0"
            node[part] = node.get(part) or [draw(for_model(model, at))]
            node = node[part][0]
        elif kind is dict:
            at += ".db"
            node[part] = node.get(part) or {"db": draw(for_model(model, at))}
            node = node[part]["db"]
        else:
            if not isinstance(node.get(part), dict):
                node[part] = draw(for_model(model, at))
            node = node[part]
    return _wired(doc)


def _wired(doc: dict) -> dict:
    """Every service an edge calls is there (the generator names ``api``)."""
    tiers = [doc["downstream"], *doc.get("services", {}).values()]
    called = {edge.get("service") for tier in tiers for edge in tier.get("calls", [])}
    if called:
        services = doc.setdefault("services", {})
        for name in sorted(filter(None, called)):
            services.setdefault(name, {})
    return doc


def _where(path: str) -> str:
    """Where the field at the schema's *path* sits in :func:`with_value`'s scenario."""
    at, model, parts = "", Scenario, path.split(".")
    for part in parts[:-1]:
        field = model.model_fields[part]
        model = section_type(field.annotation)  # type: ignore[assignment]
        kind = _inner(field.annotation)
        at += f"{part}." + ("0." if kind is list else "db." if kind is dict else "")
    return at + parts[-1]


@st.composite
def with_field(draw, path: str) -> Scenario | None:
    """A scenario with the field at *path* drawn (set, or at its default: the test
    assumes it set), or None when nothing valid came of it."""
    field = field_at(Scenario, path)
    assert field is not None
    if _inner(field.annotation) is dict:  # a map of services: one
        value: Any = {"db": draw(for_model(section_type(field.annotation), f"{path}.db"))}
    else:
        value = draw(for_annotation(field.annotation, list(field.metadata), _where(path)))
    return repaired(with_value(draw, path, value), draw)


def judged_paths() -> list[str]:
    """Every field path of the schema but the members' own fields (their member decides)
    and the sections always there (``retry``: their fields are judged)."""
    found = []
    for path, field in fields(Scenario):
        parent = field_at(Scenario, path.rpartition(".")[0]) if "." in path else None
        if parent is not None and any(isinstance(f, Family) for f in nested(parent.annotation)):
            continue
        if any(isinstance(f, Family) for f in nested(field.annotation)):
            continue  # a member's place: test_a_member_is_run_or_refused_as_it_declares
        section = isinstance(field.default, BaseModel) or (
            field.is_required() and section_type(field.annotation) is not None
            and _inner(field.annotation) is None)
        if not section:
            found.append(path)
    return found


def decided_by_members() -> set[str]:
    """Places whose members all declare ``emulated``: their fields are the member's."""
    return {place for place, family in places() if all(m.emulated for m in family.members)}


CHOSEN_BY = {"downstream.occ": "downstream.model",  # a section its chooser's refusal covers
             "downstream.broker": "downstream.model"}


@pytest.mark.slow  # ~250 fields, a fraction of a second each
@pytest.mark.parametrize("path", [
    p for p in judged_paths() if p not in emulates.RUNS
    and not any(p.startswith(f"{place}.") for place in decided_by_members())])
@DRAWN
@given(data=st.data())
def test_a_field_the_testbed_does_not_run_is_refused_when_set(path, data):
    """Every field of the schema that is not on the allow-list: a scenario with it set
    is refused at it (or at a section holding it), by the testbed and, for the
    downstream's fields, by serve. So no field is silently ignored, and a field the
    schema gains is refused until someone adds it to the allow-list."""
    sc = data.draw(with_field(path))
    assume(sc is not None)
    assume(any(related(s.key, path) for s in emulates.settings(sc)))
    chooser = next((c for sec, c in CHOSEN_BY.items() if related(sec, path)), path)
    assert any(related(k, path) or k == chooser for k in refused_keys(sc)), path
    if path.startswith(emulates.DOWNSTREAM):
        assert any(related(k, path) or k == chooser
                   for k in refused_keys(sc, downstream_only=True)), path


def test_the_allow_list_names_only_fields_the_schema_has():
    """A field renamed or removed leaves no stale entry (which would allow nothing)."""
    schema = {path for path, _ in fields(Scenario)}
    assert set(emulates.RUNS) <= schema, set(emulates.RUNS) - schema
    assert set(emulates.REFUSED) <= schema, set(emulates.REFUSED) - schema


def _flat(data: Any, key: str, where: str) -> typing.Iterator[tuple[str, str, Any]]:
    """``(schema path, place, value)`` of every leaf of a dumped scenario."""
    if isinstance(data, dict) and not (key.endswith("params") or key == "services"):
        for name, value in data.items():
            yield from _flat(value, f"{key}.{name}".lstrip("."), f"{where}.{name}".lstrip("."))
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        for i, item in enumerate(data):
            yield from _flat(item, key, f"{where}.{i}")
    else:
        yield key, where, data


def _dumped(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value


def _in_member(scenario: Scenario, where: str) -> Member | None:
    parts = where.split(".")
    return next((found for n in range(len(parts), 0, -1)
                 if isinstance(found := value_at(scenario, ".".join(parts[:n])), Member)),
                None)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_scenario_is_refused_at_a_field_it_sets_or_runs_every_field_it_sets(data):
    """For any valid scenario: the testbed refuses it naming a field it sets (not at its
    default), or every field it sets, read from its dump, is on the allow-list or a
    field of a member that declares itself emulated."""
    sc = repaired(data.draw(scenarios(), label="scenario"), data.draw)
    assume(sc is not None)
    try:
        emulates.check_supported(sc)
    except TestbedError as exc:
        where = str(exc).split(": ")[1]
        key = ".".join(p for p in where.split(".") if not p.isdigit()
                       and p not in sc.services)
        field = field_at(Scenario, key)
        assert field is not None, where
        assert field.is_required() or value_at(sc, where) != field.get_default(
            call_default_factory=True), where
        return
    for key, where, value in _flat(sc.model_dump(), "", ""):
        field = field_at(Scenario, key)
        assert field is not None, key
        if not field.is_required() and value == _dumped(field.get_default(
                call_default_factory=True)):
            continue
        member = _in_member(sc, where)
        assert key in emulates.RUNS or (member is not None and member.emulated), where


# -- serve: its port and host -------------------------------------------------------------

@pytest.mark.parametrize(("host", "port", "said"), [
    ("127.0.0.1", 70000, "--port 70000: a port is 1-65535"),
    ("127.0.0.1", -1, "--port -1: a port is 1-65535"),
    ("", 8000, "--host '': name the address"), ("  ", 8000, "--host '  ': name"),
    ("0", 8000, "--host '0' means every interface: write 0.0.0.0 or ::"),
    ("::0", 8000, "--host '::0' means every interface")])
def test_serve_refuses_a_port_out_of_range_and_a_host_not_named(host, port, said):
    with pytest.raises(UsageError, match="^" + said.replace("(", r"\(")):
        listen_on(host, port)


def test_serve_with_a_bad_port_says_so_in_one_line_without_a_traceback():
    done = herdsim("serve", "outage", "--port", "70000")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --port 70000: a port is 1-65535 (or 0: one the system picks)"]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "127.0.0.1"])
def test_the_url_serve_prints_answers_even_on_a_wildcard_and_a_port_the_system_picked(host):
    """``--port 0 --host 0.0.0.0``: the URL printed is one a client on this machine can
    call (a wildcard is not an address to call, and port 0 is not the port)."""
    sc = load_scenario(BUNDLED / "testbed.yaml")
    said: list[str] = []

    async def call_it() -> int:
        serving = asyncio.create_task(serve_forever(sc, listen_on(host, 0), 0, said.append))
        while not said:
            await asyncio.sleep(0.01)
        try:
            async with aiohttp.ClientSession() as session, session.post(
                    f"{said[0]}/call") as response:
                return response.status
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    assert asyncio.run(call_it()) == 200
    assert ":0/" not in said[0] + "/" and url_of(host, 1) != "http://:1"

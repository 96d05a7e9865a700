"""Scenarios drawn from the schema itself: a Hypothesis strategy that walks the pydantic
models of :class:`herdsim.config.scenario.Scenario` field by field.

Every field is drawn from its own annotation and constraints (``Literal`` members,
``ge``/``gt``/``le``/``lt`` bounds, optional sections present or absent, lists, maps,
unions of sections: a family's union draws one member and only its fields; a family
held flat in its section keeps only the chosen member's), so a field or a member the
schema gains is drawn without a change here, and a constraint it tightens narrows what
is drawn. The few things a type cannot
say are given here, and only those:

* **size** (:data:`SIZES`): the fields that size a run (its duration, rates, counts) draw
  from small ranges, so that a scenario runs in well under a second;
* **names** (:data:`NAMES`): strings whose valid values live outside the schema (a
  strategy's or a preset's name, a trace file, a service's name);
* **the graph**: ``services`` and every ``calls[].service`` are wired into a graph of 1-4
  tiers without a cycle, each service called by a tier above it.

Whatever the schema's own checks refuse is refused (the caller rejects the example); so a
scenario that comes out of :func:`scenarios` is one that ``herdsim validate`` accepts.
"""

from __future__ import annotations

import functools
import operator
import tempfile
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import annotated_types as at
import yaml
from hypothesis import strategies as st
from pydantic import BaseModel

from herdsim.config.graph import Edge
from herdsim.config.loading import validate
from herdsim.config.scenario import Scenario
from herdsim.config.schema import field_at
from herdsim.errors import ScenarioError
from herdsim.policies import arrivals, backoff, disciplines, downstreams
from herdsim.policies.cache import Cache
from herdsim.policies.durations import parse_duration
from herdsim.policies.family import Family
from herdsim.policies.presets import PRESETS

SERVICE_NAMES = ("api", "db", "search")  # ("cache" is a tier's field)
CLASSED_DEFENCES = ("shedding", "admission", "codel")  # what criticality classes order
# The round trip through YAML (what a user would write) by libyaml when it is there: the
# same documents as the pure-Python safe loader and dumper, several times faster; it was
# most of the cost of drawing a scenario.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _trace_file() -> str:
    """A small recorded trace (CSV, seconds): 300 arrivals over 3 s, bunched at 1 s."""
    path = Path(tempfile.gettempdir()) / "herdsim-generated-trace.csv"
    if not path.exists():
        times = sorted([i / 120 for i in range(240)] + [1.0 + i / 2000 for i in range(60)])
        path.write_text("time\n" + "".join(f"{t:.4f}\n" for t in times))
    return str(path)

# Field -> a strategy for its value, by the field's dotted path with list indexes and map
# keys as ``*``, or by its last name alone. Only sizes: how long, how many, how fast.
SIZES: dict[str, st.SearchStrategy] = {
    "duration": st.floats(1.0, 3.0),  # the run's
    "workload.spikes.*.duration": st.floats(0.05, 1.0),
    "*.outages.*.duration": st.floats(0.01, 1.0),
    "*.outages.*.start": st.floats(0.0, 1.5),
    "workload.rate": st.floats(1.0, 300.0),
    "rate": st.floats(0.5, 300.0),
    "burst_size": st.integers(1, 40),
    "workload.interval": st.floats(0.05, 1.0),  # a periodic client's (clients: below)
    "workload.restarts.*": st.floats(0.0, 3.0),
    "backlog": st.integers(0, 60),
    "workload.keys": st.integers(1, 40),
    "*.cache.size": st.integers(1, 30),
    "*.cache.keys.count": st.none() | st.integers(1, 60),
    "*.cache.keys.alpha": st.floats(0.1, 3.0),
    "*.cache.eviction.ttl": st.floats(0.01, 1.0),
    "*.cache.eviction.stale": st.floats(0.0, 1.0),
    "*.cache.hit_latency": st.none() | st.floats(0.0, 0.05),
    "*.rate_limit.limit": st.integers(1, 50),
    "*.rate_limit.window": st.floats(0.05, 1.0),
    "workers.count": st.none() | st.integers(1, 40),  # None: open-loop callers
    "clients": st.integers(1, 5),
    "concurrency": st.integers(1, 40),
    "workers.autoscale.min": st.integers(1, 10),
    "workers.autoscale.max": st.integers(10, 60),
    # a fraction half the time (busy_fraction wants one)
    "workers.autoscale.target": st.floats(0.05, 1.0) | st.floats(1.0, 20.0),
    "workers.autoscale.interval": st.floats(0.05, 1.0),
    "count": st.integers(1, 3),  # an edge's parallel calls
    "max_attempts": st.integers(2, 4),  # hedged copies
    "max_retries": st.none() | st.integers(0, 6),
    "seed": st.integers(0, 2**32 - 1),
    "first_attempt": st.integers(0, 5),
    "max_connections": st.integers(1, 60),  # a broker's: one that binds now and then
    "keepalive": st.floats(0.0, 1.0),
    # a degrading server's lag and heap within a short run; refusals costing up to a
    # few service times (an hour would hold a slot past any run)
    "*.degradation.recovery": st.floats(0.01, 2.0),
    "*.degradation.heap": st.floats(10.0, 500.0),
    "*.degradation.memory_per_call": st.floats(0.1, 20.0),
    **{f"*.refusal_cost.{outcome}": st.floats(0.0, 0.05)
       for outcome in ("rejected", "shed", "rate_limited", "admission", "expired")},
    "replicas": st.none() | st.integers(1, 5),  # a fleet (its parts need it: repaired)
    "replica": st.none() | st.integers(0, 4),  # an outage's one replica
    "choice_count": st.integers(2, 4),
    "minimum_ring_size": st.integers(1, 256),
    "table_size": st.sampled_from([2, 3, 5, 7, 13, 251, 257]),  # primes (Maglev's)
    "weights": st.lists(st.floats(0.1, 5.0), min_size=1, max_size=5),
    "max_requests": st.none() | st.integers(1, 40),
    "success_rate_request_volume": st.integers(1, 50),
    "success_rate_minimum_hosts": st.integers(1, 5),
    "consecutive_5xx": st.none() | st.integers(1, 5),
    "unhealthy_threshold": st.integers(1, 3),
    "healthy_threshold": st.integers(1, 3),
    "max_pending_requests": st.none() | st.integers(0, 30),
    **{f"workload.criticality.{name}": st.floats(0.0, 3.0)
       for name in ("critical_plus", "critical", "sheddable_plus", "sheddable")},
}

# Strings whose valid values are not in their type.
NAMES: dict[str, st.SearchStrategy] = {
    "name": st.just("generated"),
    "description": st.just(""),
    "queue": st.none(),
    "sha256": st.none(),
    "strategy": st.sampled_from(backoff.FAMILY.names()),  # the libraries' too
    "preset": st.none() | st.sampled_from(sorted(PRESETS)),
    "params": st.just({}),
    "downstream.name": st.none() | st.just("frontend"),
    "services.*.name": st.none(),
    "workload.trace.file": st.builds(_trace_file),
    "downstream.calls.*.service": st.just(SERVICE_NAMES[0]),  # an edge's callee: _wire
    "services.*.calls.*.service": st.just(SERVICE_NAMES[0]),
    "services.calls.*.service": st.just(SERVICE_NAMES[0]),  # a blamed ``services.calls``
}

# Optional in the type, written always: a source of arrivals is needed, the callers'
# count (or null: open loop) decides what else applies, and a client timeout is what lets
# most mechanisms (blackholes, deadlines, hedges) apply.
ALWAYS = frozenset({"workload.rate", "workers.count", "downstream.timeout",
                    "downstream.calls.*.timeout", "services.*.calls.*.timeout",
                    "retry.strategy"})  # one of ~25 names: drawn every time, each is seen

PRESENT = 4  # an optional field is written one time in PRESENT (else its default holds)


def _key(path: str) -> str:
    return ".".join("*" if part.isdigit() or part in SERVICE_NAMES else part
                    for part in path.split("."))


def _given(path: str) -> st.SearchStrategy | None:
    key = _key(path)
    tier = key.replace("downstream.", "*.", 1).replace("services.*.", "*.", 1)
    for table in (SIZES, NAMES):
        for k in (key, tier):
            if k in table:
                return table[k]
    last = key.rsplit(".", 1)[-1]
    for table in (SIZES, NAMES):
        if last in table:
            return table[last]
    return None


def _bounds(metadata: list) -> tuple[float | None, float | None, bool, bool]:
    lo = hi = None
    lo_open = hi_open = False
    for m in metadata:
        if isinstance(m, at.Ge):
            lo = float(m.ge)  # type: ignore[arg-type]
        elif isinstance(m, at.Gt):
            lo, lo_open = float(m.gt), True  # type: ignore[arg-type]
        elif isinstance(m, at.Le):
            hi = float(m.le)  # type: ignore[arg-type]
        elif isinstance(m, at.Lt):
            hi, hi_open = float(m.lt), True  # type: ignore[arg-type]
        for inner in getattr(m, "metadata", ()):  # a FieldInfo inside Annotated
            ilo, ihi, ilo_open, ihi_open = _bounds([inner])
            lo, lo_open = (ilo, ilo_open) if ilo is not None else (lo, lo_open)
            hi, hi_open = (ihi, ihi_open) if ihi is not None else (hi, hi_open)
    return lo, hi, lo_open, hi_open


def _is_duration(metadata: list) -> bool:
    return any(getattr(m, "func", None) is parse_duration for m in metadata) or any(
        _is_duration(list(getattr(m, "metadata", ()))) for m in metadata)


def _number(kind: type, metadata: list) -> st.SearchStrategy:
    lo, hi, lo_open, hi_open = _bounds(metadata)
    if kind is int:
        first = int(lo or 0) + (1 if lo_open else 0)
        last = int(hi) - (1 if hi_open else 0) if hi is not None else first + 20
        return st.integers(first, min(last, first + 20))
    if _is_duration(metadata):  # seconds: from a millisecond to a few seconds
        first = max(lo or 0.0, 0.001 if lo_open or lo is None else lo)
        values = st.sampled_from([0.0, 0.001, 0.005, 0.02, 0.05, 0.1, 0.3, 1.0])
        return values.filter(lambda v: (v > lo if lo_open else v >= first)  # type: ignore
                             and (hi is None or (v < hi if hi_open else v <= hi)))
    first = lo if lo is not None else 0.0
    last = hi if hi is not None else first + 10.0
    return st.floats(first, min(last, first + 10.0), exclude_min=lo_open, exclude_max=hi_open,
                     allow_nan=False)


def for_annotation(annotation: Any, metadata: list, path: str) -> st.SearchStrategy:
    """A strategy for a value of *annotation* (with its field's *metadata*) at *path*."""
    given = _given(path)
    if given is not None:
        return given
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return for_annotation(args[0], [*metadata, *args[1:]], path)
    if origin is Union or origin is types.UnionType:
        return st.one_of([for_annotation(a, metadata, path) for a in args])
    if annotation is type(None):
        return st.none()
    if origin is Literal:
        return st.sampled_from(args)
    if annotation is bool:
        return st.booleans()
    if annotation in (int, float):
        return _number(annotation, metadata)
    if origin is list:
        if path == "workload.profile":
            return _profile()
        return st.lists(for_annotation(args[0], [], f"{path}.0"), max_size=2)
    if origin is dict:
        return st.just({})
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return for_model(annotation, path)
    raise TypeError(f"{path}: no strategy for {annotation!r}: add one to scenario_gen")


@functools.cache
def for_model(model: type[BaseModel], path: str = "") -> st.SearchStrategy[dict]:
    """A strategy for a section of type *model*: its required fields always, each optional
    one now and then."""
    required: dict[str, st.SearchStrategy] = {}
    optional: dict[str, st.SearchStrategy] = {}
    for name, field in model.model_fields.items():
        where = f"{path}.{name}" if path else name
        if where == "services":
            continue  # drawn whole below
        value = for_annotation(field.annotation, list(field.metadata), where)
        always = (field.is_required() or _key(where) in ALWAYS
                  or typing.get_origin(field.annotation) is Literal)  # a choice: drawn
        (required if always else optional)[name] = value
    return st.fixed_dictionaries(
        {**required, **{name: _sometimes(value) for name, value in optional.items()}}
    ).map(lambda doc: {k: v for k, v in doc.items() if v is not _ABSENT})


_ABSENT = object()


def _sometimes(value: st.SearchStrategy) -> st.SearchStrategy:
    """*value* one time in :data:`PRESENT`, else absent (the field keeps its default)."""
    return st.one_of(*[st.just(_ABSENT)] * (PRESENT - 1), value)


@st.composite
def _profile(draw) -> list[dict]:
    """Steps of a rate profile: the base rate at 0, then up to two more (the ramps may
    run into the next step: the validation says so)."""
    times = [0.0, *sorted(draw(st.lists(st.floats(0.01, 3.0), max_size=2, unique=True)))]
    steps = [{"at": t, "rate": draw(st.floats(0.0, 300.0))} for t in times]
    steps[0]["rate"] = max(steps[0]["rate"], 1.0)
    for step in steps[1:]:
        if draw(st.booleans()):
            step["ramp"] = draw(st.floats(0.0, 0.5))
    return steps


@st.composite
def scenarios(draw) -> dict:
    """A scenario dict across the whole schema: 1-4 tiers, sections of every kind."""
    doc = draw(for_model(Scenario))
    # as many graphs as single tiers (a list strategy drew an empty one ~49 times in 50)
    count = draw(st.integers(0, 3))
    names = list(draw(st.permutations(SERVICE_NAMES)))[:count]
    tiers = [doc.setdefault("downstream", {})]
    doc["services"] = {}
    for name in names:
        section = draw(for_model(type(Scenario.model_fields["downstream"].default),
                                 f"services.{name}"))
        doc["services"][name] = section
        tiers.append(section)
    if not names:
        del doc["services"]
    _wire(draw, tiers, names)
    workload = doc["workload"]
    if workload.get("arrivals") == "trace" or workload.get("trace") is not None:
        workload["arrivals"] = "trace"  # they go together
        workload["trace"] = {"file": _trace_file(), **(workload.get("trace") or {})}
        workload.pop("rate", None)  # the trace's mean
    elif workload.get("arrivals") == "periodic":
        for name in ("rate", "profile", "spikes"):  # it sets its own rate
            workload.pop(name, None)
        workload.setdefault("clients", draw(SIZES["clients"]))
        workload.setdefault("interval", draw(SIZES["workload.interval"]))
        if "restarts" not in workload and draw(st.booleans()):  # half the time: restarts
            # (drawn as any optional field, they met periodic arrivals once in ~2,000 draws)
            workload["restarts"] = [draw(SIZES["workload.restarts.*"])]
    elif workload.get("profile"):
        workload["rate"] = workload["profile"][0]["rate"]  # the profile's first step
    if doc.get("retry", {}).get("late_answers") and draw(st.booleans()):
        _late_answers_apply(doc)  # half the time: what they need, so they run
    if workload.get("criticality") is not None and draw(st.booleans()):
        _classes_apply(draw, doc)  # half the time: with a defence they order, so they run
    _only_chosen(workload, arrivals.FAMILY)
    for i, tier in enumerate(tiers):
        _only_chosen(tier, downstreams.FAMILY)
        _only_chosen(tier, disciplines.FAMILY)
        if tier.get("discipline") == "adaptive_lifo":
            tier.setdefault("lifo_threshold", draw(st.integers(1, 20)))
        model = tier.get("model")  # a model's own section (occ, broker): half the time
        own = downstreams.FAMILY.fields.model_fields.get(model or "")
        if not i and own is not None and tier.get(model) is None and draw(st.booleans()):
            section = _without_none(own.annotation)  # every field: each is rare as it is
            tier[model] = {name: draw(for_annotation(
                f.annotation, list(f.metadata), f"downstream.{model}.{name}"))
                for name, f in section.model_fields.items()}
        if i:  # a service has no model of its own (the workers' downstream picks it)
            for name in downstreams.FAMILY.fields.model_fields:
                tier.pop(name, None)
        _fleet(draw, tier)
    autoscale = doc.get("workers", {}).get("autoscale")
    if autoscale and doc["workers"].get("count") is not None:  # the fleet starts in range
        doc["workers"]["count"] = min(max(doc["workers"]["count"], autoscale.get("min", 1)),
                                      autoscale.get("max", autoscale.get("min", 1)))
    return doc


FLEET_PARTS = ("balancer", "outlier_detection", "health_check")


def _fleet(draw, tier: dict) -> None:
    """A tier with a fleet's part (a balancer, outlier detection, health checks, an outage
    of one replica) is given the replicas it needs half the time (else the part goes:
    repaired), so fleets meet every other mechanism."""
    wants = any(name in tier for name in FLEET_PARTS) or any(
        o.get("replica") is not None for o in tier.get("outages", []))
    if wants and not tier.get("replicas") and draw(st.booleans()):
        tier["replicas"] = draw(st.integers(2, 5))
    balancer = tier.get("balancer") or {}
    if balancer.get("kind") == "weighted" and tier.get("replicas"):  # one weight each
        balancer["weights"] = draw(st.lists(st.floats(0.1, 5.0), min_size=tier["replicas"],
                                            max_size=tier["replicas"]))
    if any(o.get("mode") == "flush" for o in tier.get("outages", [])) and \
            not tier.get("cache") and draw(st.integers(0, 3)):  # a flush empties a cache
        # (3 times in 4; half the time, flush went unchosen in 600 draws of Hypothesis 6.155)
        tier["cache"] = draw(for_model(Cache, "downstream.cache"))


def _late_answers_apply(doc: dict) -> None:
    """``retry.late_answers`` needs a timeout, the queue model at its at-start service, no
    network delays, graph, hedging or cache, sleeps and no keys (each refused else)."""
    ds = doc["downstream"]
    for name in ("network_delay", "request_delay", "calls", "model", "occ", "cache"):
        ds.pop(name, None)
    ds.setdefault("overload", {})["latency_model"] = "at_start"
    ds["timeout"] = ds.get("timeout") or 0.5
    for name in ("services", "hedging"):
        doc.pop(name, None)
    doc.get("workers", {}).pop("retry_mode", None)
    doc["workload"].pop("keys", None)
    doc["workload"].pop("key_skew", None)


def _classes_apply(draw, doc: dict) -> None:
    """``workload.criticality`` needs queue workers and the queue model; what it orders
    besides the room is a defence (shedding, an admission limit, CoDel): one is drawn for
    the workers' downstream when it has none."""
    ds = doc["downstream"]
    for name in ("model", "occ", "broker"):
        ds.pop(name, None)
    workers = doc.setdefault("workers", {})
    workers["count"] = workers.get("count") or draw(st.integers(1, 40))
    if not any(ds.get(name) for name in CLASSED_DEFENCES):
        name = draw(st.sampled_from(CLASSED_DEFENCES))
        field = Scenario.model_fields["downstream"].annotation.model_fields[name]
        section = typing.get_args(field.annotation)[0]  # (not its None)
        ds[name] = draw(for_annotation(section, [], f"downstream.{name}"))


def _only_chosen(section: dict, family: Family) -> None:
    """A family held flat in its section (``workload.arrivals``, a tier's ``model``):
    only the chosen member's fields are kept (the schema's union draws only them)."""
    chosen = family.member(section.get(family.tag, family.default))
    for member in family.members:
        for name in set(member.model_fields) - set(chosen.model_fields):
            section.pop(name, None)


def _wire(draw, tiers: list[dict], names: list[str]) -> None:
    """Each caller's edges to services below it; every service called from above."""
    for i, tier in enumerate(tiers):
        below = names[i:]  # tiers[i + 1:] are the services names[i:]
        calls = tier.get("calls", [])
        if not below:
            tier.pop("calls", None)
            continue
        for edge in calls:
            edge["service"] = draw(st.sampled_from(below))
        if i + 1 < len(tiers) and not any(
                e["service"] == names[i] for t in tiers[:i + 1] for e in t.get("calls", [])):
            where = "downstream" if i == 0 else f"services.{names[i - 1]}"
            calls.append({**draw(for_model(Edge, f"{where}.calls.{len(calls)}")),
                          "service": names[i]})
        tier["calls"] = calls


def repaired(doc: dict, draw, tries: int = 80) -> Scenario | None:
    """*doc* made valid by the schema's own checks, which say what goes with what
    (``key_skew`` needs ``keys``, a kind's fields apply to that kind): each field a check
    blames is drawn again once (or drawn, when it is missing: ``lifo_threshold`` for an
    ``adaptive_lifo`` room), then removed. The scenario, or None when nothing can be
    mended."""
    drawn_again: set[str] = set()  # each blamed field is drawn again once, then removed
    for _ in range(tries):
        try:
            return validate(yaml.load(yaml.dump(doc, Dumper=_DUMPER), Loader=_LOADER))
        except ScenarioError as exc:
            where = exc.problems[0][0]
        parts = where.split(".") if where else []
        if where not in drawn_again and draw is not None and _fill(doc, parts, draw):
            drawn_again.add(where)
            continue
        drawn_again.add(where)
        if not _remove(doc, parts):
            return None
    return None


def _fill(doc: dict, parts: list[str], draw) -> bool:
    """Draw the blamed field again (or for the first time, when it is missing), when its
    section is there."""
    *above, name = parts or [""]
    section: Any = doc
    for part in above:
        if isinstance(section, list) and part.isdigit() and int(part) < len(section):
            section = section[int(part)]
        elif isinstance(section, dict) and part in section:
            section = section[part]
        else:
            return False
    if not isinstance(section, dict):
        return False
    key = ".".join(p for p in parts if not p.isdigit() and p not in SERVICE_NAMES)
    if key.startswith("services."):  # a service's field is a tier's; "services" is the map
        key = key.replace("services", "downstream", 1)
    field = field_at(Scenario, key)
    if field is None:
        return False
    # no filter: a filtered draw that fails rejects the whole example, and it did for
    # nearly every scenario with a graph (the census ran single tiers only)
    value = draw(for_annotation(_without_none(field.annotation), list(field.metadata),
                                ".".join(parts)))
    if value is None:  # a size or a name that may be null: removed instead
        return False
    section[name] = value
    return True


def _without_none(annotation: Any) -> Any:
    """*annotation* without its ``None`` (an optional section drawn present)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *marks = typing.get_args(annotation)
        return typing.Annotated[(_without_none(inner), *marks)]  # type: ignore[misc]
    if origin is Union or origin is types.UnionType:
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        return functools.reduce(operator.or_, kept) if kept else annotation
    return annotation


def _remove(doc: Any, path: list[str], top: bool = True) -> bool:
    """Remove the entry at *path* (or the nearest one above it that exists) from *doc*;
    never the run's duration or workload."""
    if not path:
        return False
    head, rest = path[0], path[1:]
    key: Any = int(head) if isinstance(doc, list) and head.isdigit() else head
    inside = doc[key] if (isinstance(doc, dict) and key in doc) or (
        isinstance(doc, list) and isinstance(key, int) and key < len(doc)) else None
    if inside is None:
        return False
    if rest and isinstance(inside, (dict, list)) and _remove(inside, rest, top=False):
        return True
    if rest and len(rest) == 1 and isinstance(inside, dict) and rest[0] not in inside:
        return False  # a missing required field: its section goes, a level up
    if top and head in ("workload", "duration"):
        return False
    del doc[key]
    return True

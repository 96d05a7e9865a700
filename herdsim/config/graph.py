"""The call graph in a scenario: services that call services.

A scenario's ``downstream`` and every entry of its top-level ``services`` map are
:class:`Caller` sections: the fields of the downstream (concurrency, waiting room, service
time, outages, overload, rate limit, Retry-After, network delays, defences) plus ``calls``,
the edges it calls while serving one call, in order. An :class:`Edge` names the service it
calls and carries its own timeout, retry policy (presets included), budget and breaker,
and a fan-out ``count``. A scenario without ``services`` and without ``calls`` is a
single-tier scenario exactly as before: :func:`strip_unset` keeps its written form free
of the graph's keys.
"""

from __future__ import annotations

import re
from graphlib import CycleError, TopologicalSorter
from typing import Any, Literal

from pydantic import Field, field_validator

from herdsim.config.sections import (
    Downstream,
    Retry,
)
from herdsim.policies import budgets, downstreams, presets
from herdsim.policies.breaker import Breaker, Resilience4j
from herdsim.policies.durations import format_duration
from herdsim.policies.fields import (
    FieldError,
    NonNegativeDuration,
    PositiveDuration,
    Section,
)

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}\Z")
TOP = "downstream"  # the workers' downstream's name unless it sets ``name``
MAX_COUNT = 1000  # parallel calls of one edge
MAX_SERVICES = 100  # services in one scenario (a real call graph is a handful)
MAX_DEPTH = 16  # tiers on the longest path of calls, the workers' downstream included


def _tier_name(name: str) -> str:
    if not NAME.match(name):
        raise ValueError(f"{name!r} cannot name a service: lower-case letters, digits and "
                         "'_', starting with a letter, at most 40 characters (it prefixes "
                         "time-series columns and labels metrics)")
    return name


NON_FATAL = ("error", "timeout", "rejected", "down", "throttled", "failed")


class Throttle(Section):
    """gRPC's retry throttling (``retryThrottling``), for hedged copies."""

    max_tokens: float = Field(gt=0, le=1000, description="tokens at the start (the bucket's "
                                                         "size)")
    token_ratio: float = Field(gt=0, le=1, description="tokens a success returns (a "
                                                       "failure costs 1)")


class Hedging(Section):
    """gRPC's hedging policy (A6): copies of a call, the first success wins."""

    delay: NonNegativeDuration = Field(0.0, description="between copies (0: all at once)")
    max_attempts: int = Field(2, ge=2, le=100, description="copies at most, the first "
                                                           "included")
    non_fatal: list[Literal["error", "timeout", "rejected", "down", "throttled",
                            "failed"]] = Field(
        [], description="outcomes after which the other copies go on (any other ends it)")
    throttle: Throttle | None = None


class Edge(Section):
    """One call a tier makes while serving a call: to ``service``, ``count`` in parallel."""

    service: str = Field(description="the service called (a key of services)")
    count: int = Field(1, ge=1, le=MAX_COUNT,
                       description="calls made in parallel, all needed (a fan-out)")
    timeout: PositiveDuration | None = Field(None, description="the caller's timeout on "
                                                               "this edge; null: none")
    retry: Retry = Retry()
    budget: budgets.Budget | None = Field(None, description="a retry budget shared by every "
                                                            "call of this edge")
    breaker: Breaker = Resilience4j()
    deadline: Literal["propagate", "off"] | None = Field(
        None, description="propagate: the timeout is at most the caller's remaining time; "
                          "null: as the top-level deadline")
    cancel: bool = Field(False, description="the called tier stops serving a call its "
                                            "caller gave up, and its calls for it")
    hedging: Hedging | None = Field(None, description="hedged copies instead of retries")


class Caller(Downstream):
    """The workers' downstream, or one service of ``services``: a downstream that may
    call other services (``calls``) while it serves a call."""

    name: str | None = Field(None, description="the workers' downstream's name in outputs "
                                               "(default: downstream)")
    calls: list[Edge] = Field([], description="the calls made while serving one call, in "
                                              "order")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str | None) -> str | None:
        return name if name is None else _tier_name(name)


def names_ok(services: dict[str, Caller]) -> dict[str, Caller]:
    """``services``' keys are valid tier names, at most :data:`MAX_SERVICES` of them (the
    field validator of ``services``)."""
    if len(services) > MAX_SERVICES:
        raise ValueError(f"{len(services):,} services; at most {MAX_SERVICES}")
    for name in services:
        _tier_name(name)
    return services


def has_graph(downstream: Caller, services: dict[str, Caller], hedging=None) -> bool:
    """Whether a scenario runs as a graph (its outputs then show each tier): services,
    calls, a named downstream, or the workers' calls hedged (copies are cancelled)."""
    return (bool(services) or bool(downstream.calls) or downstream.name is not None
            or hedging is not None)


def top_name(downstream: Caller) -> str:
    """The workers' downstream's name in outputs."""
    return downstream.name or TOP


def tiers(downstream: Caller, services: dict[str, Caller]) -> dict[str, Caller]:
    """Every tier by name, the workers' downstream first, then ``services`` as written."""
    return {top_name(downstream): downstream, **services}


def check(downstream: Caller, services: dict[str, Caller], duration: float) -> None:
    """The graph's cross-field rules: known services, no cycle, no service's own
    ``model``/``timeout``, outages within the run, a timeout on edges to blackholes and a
    continuous latency model only without calls. Raises :class:`FieldError`."""
    top = top_name(downstream)
    if top in services:
        raise FieldError(f"services.{top}", f"{top!r} already names the workers' downstream; "
                                            "set downstream.name to another name")
    for name, tier in services.items():
        for field, default in (("model", "queue"), ("timeout", None)):
            if getattr(tier, field) != default:
                raise FieldError(f"services.{name}.{field}",
                                 "a service has no " + field + (" (a caller's timeout belongs "
                                 "to its edge: calls[].timeout)" if field == "timeout"
                                 else "; only the workers' downstream picks one"))
        for i, outage in enumerate(tier.outages):
            if outage.end > duration:
                raise FieldError(f"services.{name}.outages.{i}",
                                 f"outage ends at {format_duration(outage.end)}, after the "
                                 f"run's end ({format_duration(duration)})")
    every = tiers(downstream, services)
    for name, tier in every.items():
        where = "downstream" if tier is downstream else f"services.{name}"
        if tier.calls and not downstreams.named(downstream.model).queueing:
            raise FieldError(f"{where}.calls", "calls need model: queue")
        if tier.calls and tier.overload.latency_model != "at_start":
            raise FieldError(f"{where}.calls", "a tier that calls others needs "
                                               "overload.latency_model: at_start")
        for i, edge in enumerate(tier.calls):
            if edge.service not in services:
                known = ", ".join(sorted(services)) or "none"
                raise FieldError(f"{where}.calls.{i}.service",
                                 f"unknown service {edge.service!r} (services: {known})")
            callee = services[edge.service]
            if edge.hedging is not None and "retry" in edge.model_fields_set:
                raise FieldError(f"{where}.calls.{i}.hedging",
                                 "an edge hedges or retries, not both (as in gRPC): "
                                 "remove its retry")
            if edge.cancel and callee.serve_abandoned:
                raise FieldError(f"{where}.calls.{i}.cancel",
                                 f"{edge.service} serves abandoned calls (serve_abandoned: "
                                 "true): a cancelled call would still be served")
            hangs = next((o for o in callee.outages if o.needs_timeout), None)
            if edge.timeout is None and hangs is not None:
                raise FieldError(f"{where}.calls.{i}.timeout",
                                 f"{edge.service} has a {hangs.name()} outage: calls hang "
                                 "until this timeout")
            if edge.retry.max_retries is None and edge.retry.preset is None \
                    and not edge.retry._untrusted \
                    and getattr(edge.retry.build(), "min_sleep", None) == 0.0:
                raise FieldError(f"{where}.calls.{i}.retry.max_retries",
                                 "a strategy that may retry at once needs a limit on this "
                                 "edge (time would stand still against a fast failure)")
    order = callers_first(every)
    depth = {name: 1 for name in every}
    for name in order:
        for edge in every[name].calls:
            depth[edge.service] = max(depth[edge.service], depth[name] + 1)
    deepest = max(depth, key=depth.__getitem__)
    if depth[deepest] > MAX_DEPTH:
        raise FieldError(f"services.{deepest}", f"{depth[deepest]} tiers deep (a path of "
                                                f"calls); at most {MAX_DEPTH}")


def callers_first(every: dict[str, Caller]) -> list[str]:
    """The tiers' names, each before every tier it calls (walked without recursion, so
    any structure is safe). Raises :class:`FieldError` naming a cycle of calls."""
    sorter = TopologicalSorter({name: [] for name in every})
    for name, tier in every.items():
        for edge in tier.calls:
            sorter.add(edge.service, name)  # the callee after its caller
    try:
        return list(sorter.static_order())
    except CycleError as exc:
        cycle = exc.args[1]  # each calls the next, the first repeated at the end
        shown = cycle if len(cycle) <= 8 else [*cycle[:3], "…", *cycle[-3:]]
        raise FieldError("services", "the calls form a cycle: " + " -> ".join(shown)
                         + (f" ({len(cycle) - 1} services)" if len(cycle) > 8 else "")
                         ) from None


def fill_presets(data: dict) -> None:
    """Fill what each edge's ``retry.preset`` sets into that edge (its ``retry``,
    ``budget`` and ``breaker`` fields the edge leaves out; a preset's fields for the
    workers or the DLQ do not apply to an edge). Unknown presets are left to validation."""
    downstream = data.get("downstream")
    services = data.get("services")
    sections = [downstream] + (list(services.values()) if isinstance(services, dict) else [])
    for section in sections:
        calls = section.get("calls") if isinstance(section, dict) else None
        for edge in calls if isinstance(calls, list) else []:
            retry = edge.get("retry") if isinstance(edge, dict) else None
            name = retry.get("preset") if isinstance(retry, dict) else None
            if not isinstance(name, str) or name not in presets.PRESETS:
                continue
            for path, value in presets.get(name).fields.items():
                head, _, leaf = path.partition(".")
                if head not in ("retry", "budget", "breaker") or "." in leaf:
                    continue
                node = edge.setdefault(head, {})
                if isinstance(node, dict) and leaf not in node:
                    node[leaf] = value.copy() if isinstance(value, dict) else value


def strip_unset(data: dict[str, Any]) -> dict[str, Any]:
    """*data* (a scenario as plain data) without the graph's keys where they hold their
    defaults, so a single-tier scenario is written as before."""
    if not data.get("services"):
        data.pop("services", None)
    for key in ("deadline", "hedging"):
        if data.get(key) is None:
            data.pop(key, None)
    if "hedging" in data:  # hedged calls have no retry: an unwritten one is not written
        data.pop("retry", None)
    downstream = data.get("downstream", {})
    if downstream.get("name") is None:
        downstream.pop("name", None)
    if not downstream.get("calls"):
        downstream.pop("calls", None)
    for tier in [downstream, *data.get("services", {}).values()]:
        for edge in tier.get("calls", []):
            for key in ("deadline", "hedging"):
                if edge.get(key) is None:
                    edge.pop(key, None)
            if "hedging" in edge:
                edge.pop("retry", None)
    return data

"""A scenario in words: a one-line summary of what it contains, the fields ``--set``
changed, and its non-default fields with units."""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import BaseModel

from herdsim.analysis import tiers
from herdsim.analysis.summary import UNBOUNDED_FACTOR, bounded_capacity
from herdsim.config import graph
from herdsim.config.overrides import value_text
from herdsim.config.scenario import Scenario
from herdsim.config.schema import fields, is_duration, section_type
from herdsim.plots.style import policy
from herdsim.policies import downstreams, presets
from herdsim.policies.durations import format_duration


def _with_units(model: type[BaseModel], data: dict) -> dict:
    """*data* (a dump of *model*) with durations as ``250ms`` and sections recursed."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            out[key] = value
            continue
        section = section_type(field.annotation)
        if isinstance(value, dict) and section is not None:
            out[key] = _with_units(section, value)
        elif isinstance(value, list) and section is not None:
            out[key] = [_with_units(section, v) if isinstance(v, dict) else v for v in value]
        elif is_duration(field) and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            out[key] = format_duration(float(value))
        else:
            out[key] = value
    return out


def as_written(sc: Scenario) -> dict:
    """The scenario's fields that differ from the schema's defaults, durations with units
    (``queue`` only when it is not the scenario's name)."""
    data = sc.model_dump(mode="json", exclude_defaults=True)
    if data.get("queue") == sc.name:
        data.pop("queue")
    return _with_units(Scenario, data)


def field_docs(model: type[BaseModel] = Scenario, prefix: str = "") -> dict[str, str]:
    """``dotted.path -> description`` of every schema field that has one (list items'
    fields without their index: ``downstream.outages.error_rate``)."""
    return {f"{prefix}{path}": field.description for path, field in fields(model)
            if field.description}


def overrides(sc: Scenario, ignore: tuple[str, ...] = ("retry.strategy",)) -> list[str]:
    """``path=value`` for each field ``--set`` changed when *sc* was loaded (carried by the
    scenario, and by its output directory's ``overrides.json``), but those in *ignore*."""
    return [f"{key}={value}" for key, value in sc.overrides.items()
            if key not in ignore and not key.startswith(ignore)]


def capacity(sc: Scenario) -> float | None:
    """The downstream's capacity in calls/s as the summary's ``capacity_rate`` has it
    (:func:`~herdsim.analysis.summary.bounded_capacity`): None for the occ model or an
    effectively unbounded downstream."""
    return bounded_capacity(sc) if downstreams.named(sc.downstream.model).queueing else None


UNBOUNDED_TEXT = ("the downstream is effectively unbounded (its capacity is over "
                  f"{UNBOUNDED_FACTOR:,}× the offered rate), so no peak is compared with it")


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def busiest_tier(sc: Scenario) -> tuple[str, float, float]:
    """A call graph's tier that the offered jobs load most when nothing fails: its name,
    that load (its calls per job × the job rate over its capacity) and its capacity."""
    configs = graph.tiers(sc.downstream, sc.services)
    need = tiers.demand(configs)
    name = max(configs, key=lambda n: need[n] / configs[n].capacity_rate())
    cap = configs[name].capacity_rate()
    return name, sc.workload.rate * need[name] / cap, cap


def _before_caches(sc: Scenario, name: str) -> str:
    """What a graph's load share is taken before: the busiest tier's own cache, or the
    caches elsewhere (its calls counted as if every request missed); "" without any."""
    configs = graph.tiers(sc.downstream, sc.services)
    own = configs[name].cache
    if own is not None:
        return f" before its {own.size:,}-entry cache"
    if any(c.cache is not None for c in configs.values()):
        return " as if every cache missed"
    return ""


def facts(sc: Scenario, strategy: bool = True, varied: frozenset[str] = frozenset()) -> str:
    """One line: callers, load, downstream, outages, retry, DLQ, breaker and budget; the
    sections in *varied* (which differ between arms) are left to the arms' labels."""
    w, d, r = sc.workers, sc.downstream, sc.retry
    queueing = downstreams.named(sc.downstream.model).queueing
    if not queueing:
        parts = [downstreams.named(d.model).callers.format(
            clients=f"{w.count:,}", slots=d.concurrency,
            service=format_duration(d.service.mean))]
    else:
        parts = [f"{w.count:,} workers" if w.count is not None
                 else "open loop (a caller per job)"]
        if capacity(sc) is None:
            where = "a downstream that never saturates"
        elif sc.services:  # a call graph: the tier the offered jobs load most
            name, load, cap = busiest_tier(sc)
            where = (f"{load:.0%} of {name}'s capacity {_rate(cap)} calls/s"
                     f"{_before_caches(sc, name)}, the most loaded tier")
        else:
            load = sc.workload.rate / d.capacity_rate()
            where = f"{load:.0%} of capacity {_rate(d.capacity_rate())} calls/s"
            if d.cache is not None:  # the offered jobs, not what passes its cache
                where += f" before a {d.cache.size:,}-entry cache"
        rates = sc.workload.profile_rates()
        if max(rates) != sc.workload.rate:  # a profile: its first step, and how high it goes
            where = f"at first, {where}"
            parts.append(f"{sc.workload.rate:,.4g} jobs/s {sc.workload.arrivals}, up to "
                         f"{max(rates):,.4g} in its profile ({where})")
        else:
            parts.append(f"{sc.workload.rate:,.4g} jobs/s {sc.workload.arrivals} ({where})")
        if sc.workload.backlog:
            parts.append(f"{sc.workload.backlog:,} jobs queued at t=0")
        if sc.workload.poison_fraction:
            parts.append(f"{sc.workload.poison_fraction:.0%} poison jobs")
    if sc.services:  # a call graph: the outages say which tier they hit
        parts.append(f"{len(sc.services) + 1} tiers")
    if d.replicas is not None:
        kind = d.balancer.kind if d.balancer is not None else "round_robin"
        parts.append(f"{d.replicas} replicas ({kind})")
    for where, tier in [("", d), *((f"{name} ", t) for name, t in sc.services.items())]:
        for o in tier.outages:
            one = f"replica {o.replica} " if o.replica is not None else ""
            parts.append(f"{where}{one}{o.label()} {format_duration(o.duration)} at "
                         f"{format_duration(o.start)}")
    if not sc.all_outages and queueing:
        parts.append("no outage")
    if d.overload.collapse is not None:
        parts.append("crashes when overloaded")
    if "retry" not in varied and r.max_retries == 0:
        parts.append("no retries")  # no backoff to describe
    elif "retry" not in varied:
        retry = f"{r.strategy} " if strategy else ""
        limit = "no retry limit" if r.max_retries is None else f"≤{r.max_retries} retries"
        parts.append(f"retry {retry}base {format_duration(r.base)} "
                     f"cap {format_duration(r.cap)}, {limit}")
    if queueing and "dlq" not in varied:
        parts.append("DLQ on" if sc.dlq.enabled else "DLQ off (failed jobs go back to the queue)")
    if sc.breaker.enabled and "breaker" not in varied:
        parts.append(f"breaker per {sc.breaker.scope}")
    if sc.budget is not None and "budget" not in varied:
        parts.append(f"retry budget {sc.budget.kind}")
    return "; ".join(parts)


def _wrap(parts: list[str], sep: str, width: int = 140) -> list[str]:
    """*parts* joined by *sep* into lines of at most about *width* characters."""
    lines = [""]
    for part in parts:
        if lines[-1] and len(lines[-1]) + len(sep) + len(part) > width:
            lines[-1] += sep.rstrip()
            lines.append(part)
        else:
            lines[-1] += (sep if lines[-1] else "") + part
    return lines


def varied_sections(arms: list[Any]) -> frozenset[str]:
    """The retry-policy sections (retry, budget, breaker, dlq) that differ between *arms*."""
    def value(arm: Any, section: str) -> str:
        part = getattr(arm.scenario, section)
        return repr(part.model_dump(mode="json") if part is not None else None)

    return frozenset(s for s in ("retry", "budget", "breaker", "dlq")
                     if len({value(arm, s) for arm in arms}) > 1)


PRESET = "retry.preset"
SEPARATOR = " · "  # between the values of an arm's short label
LONGEST = 48  # characters of an arm's name in a figure (legends, rows, ticks), "…" beyond


def varied_keys(arms: list[Any]) -> list[str]:
    """The ``--vary`` paths whose value differs between *arms*, in their order."""
    keys = [key for key in arms[0].settings if key != PRESET] if arms else []
    return [key for key in keys if len({_value(arm.settings.get(key)) for arm in arms}) > 1]


def _one_policy(arm: Any) -> str:
    """A lone arm's name: its preset when the scenario sets one (with the strategy when
    ``--set`` changed the preset's), else its label."""
    name = arm.settings.get(PRESET) or arm.scenario.retry.preset
    if not name or name not in presets.PRESETS:
        return str(arm.label)
    strategy = arm.scenario.retry.strategy
    own = presets.get(name).fields.get("retry.strategy")
    return name if own in (None, strategy) else f"{name}, {strategy}"


def short_labels(arms: list[Any]) -> dict[str, str]:
    """``label -> what a figure prints for the arm``: with ``--vary``, the arm's values
    (after its policy when policies differ) joined by ``" · "``, the paths named once in
    the heading (:func:`arms_text`); else its preset or strategy; at most
    :data:`LONGEST` characters."""
    keys = varied_keys(arms)
    if len(arms) == 1 or not keys:
        names = {arm.label: _one_policy(arm) if len(arms) == 1 else str(arm.label)
                 for arm in arms}
    else:
        several = len({policy(arm) for arm in arms}) > 1
        names = {arm.label: SEPARATOR.join(([policy(arm)] if several else [])
                                           + [_value(arm.settings.get(key)) for key in keys])
                 for arm in arms}
    return {label: name if len(name) <= LONGEST else name[:LONGEST - 1].rstrip() + "…"
            for label, name in names.items()}


def _value(value: Any) -> str:
    """A varied value as ``--vary`` takes it: ``3``, ``null``, ``{kind: ratio}``."""
    return _scalar(value) if isinstance(value, (dict, list)) else value_text(value)


def arms_text(arms: list[Any]) -> str:
    """What the arms are and how their labels read: ``strategy exponential``, ``4 arms
    varying the retry strategy``, ``8 arms of strategy exponential labelled
    a.b · c.d · deadline``."""
    if len(arms) == 1:
        kind = "preset" if arms[0].settings.get(PRESET) or arms[0].scenario.retry.preset \
            else "strategy"
        return f"{kind} {_one_policy(arms[0])}"
    kind = "preset" if PRESET in arms[0].settings else "strategy"
    keys = varied_keys(arms)
    if not keys:
        return f"{len(arms)} arms varying the retry {kind}"
    if len({policy(arm) for arm in arms}) > 1:
        return f"{len(arms)} arms labelled retry {kind}{SEPARATOR}{SEPARATOR.join(keys)}"
    return (f"{len(arms)} arms of {kind} {policy(arms[0])} labelled "
            f"{SEPARATOR.join(keys)}")


def heading(c: Any, what: str, replication: int | None = None, explain: str = "") -> str:
    """A figure's title: the scenario and *what* the figure shows, the arms, what the
    scenario contains, what was overridden, and *explain* (how to read it), in lines that
    fit the figure's width."""
    sc = c.scenario
    n = len(c.arms)
    reps = (f" (replication {replication}; {c.replications} per arm)"
            if replication is not None and c.replications > 1 else "")
    arms = arms_text(c.arms) + getattr(c, "interrupted", "")
    lines = [*_wrap(f"Scenario “{sc.name}”: {what} — {arms}{reps}".split(" "), " "),
             *_wrap(facts(sc, strategy=n == 1,
                          varied=varied_sections(c.arms) if n > 1 else frozenset()
                          ).split("; "), "; ")]
    changed = overrides(sc)
    if changed:
        lines += _wrap(["changed by --set:", *changed], " ")
    if explain:
        lines += _wrap(explain.split(" "), " ")
    return "\n".join(lines)


def _scalar(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def written_yaml(sc: Scenario) -> str:
    """:func:`as_written` as YAML, each field with its schema description as a comment
    (the description itself, shown elsewhere, left out)."""
    data = as_written(sc)
    data.pop("description", None)
    docs = field_docs()
    lines: list[str] = []

    def emit(node: Any, path: str, indent: str, first: str = "") -> None:
        for i, (key, value) in enumerate(node.items()):
            lead = first if i == 0 and first else indent
            dotted = f"{path}{key}"
            note = docs.get(re.sub(r"\.\d+\.", ".", dotted))
            comment = f"  # {note}" if note else ""
            if isinstance(value, dict) and value:
                lines.append(f"{lead}{key}:{comment}")
                emit(value, f"{dotted}.", indent + "  ")
            elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                lines.append(f"{lead}{key}:{comment}")
                for j, item in enumerate(value):
                    emit(item, f"{dotted}.{j}.", indent + "    ", indent + "  - ")
            else:
                lines.append(f"{lead}{key}: {_scalar(value)}{comment}")

    emit(data, "", "")
    return "\n".join(lines) + "\n"

"""What ``herdsim testbed`` and ``herdsim serve`` run for real: an allow-list.

A walk over the validated scenario (:func:`settings`) finds every field set to anything
but its default, an optional section present, a list or a map not empty. Each is judged
(:func:`refusals`):

1. a field of :data:`REFUSED` (or inside one) is a place the testbed has no room for (a
   call graph, a network delay …), whatever it holds;
2. a family's member (:class:`~herdsim.policies.family.Member`) is run when its own
   declaration ``emulated`` says so, and its own fields with it;
3. any other field must be in :data:`RUNS`, the fields the testbed runs for real (with
   the values :class:`Only` accepts, where not all are).

Anything else is refused: a field the schema gains is refused by the testbed until it is
added here on purpose. ``herdsim serve`` emulates the downstream only: it judges the
fields under ``downstream.`` (and a graph's ``services``) as the testbed does; the rest
(workers, retries, breakers …) is its client's side, played by whoever calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from herdsim.config.scenario import Scenario
from herdsim.errors import TestbedError
from herdsim.policies.family import Member

GRAPH = "a call graph (services and downstream.calls)"

# Places the testbed has no room for, with what each is, in the order a refusal names
# them first (the most sweeping first). Checked before a member's declaration: a member
# the testbed runs in one place (a service distribution) is not run in another
# (downstream.network_delay). A place that holds a family's member and nothing else
# (CoDel, shedding, the client limiter, the autoscaler) is not here: its members declare
# whether they are run, and a new member is judged by its own declaration.
REFUSED: dict[str, str] = {
    "services": GRAPH,
    "downstream.calls": GRAPH,
    "downstream.name": "a named tier (a call graph's: its outputs per tier)",
    "deadline": "deadline propagation (along a call graph's edges)",
    "hedging": "hedged calls (the workers hedge instead of retrying)",
    "downstream.model": "the {value} model",
    "downstream.occ": "the occ model's settings",
    "downstream.broker": "the broker model's settings",
    "workers.clients": "open-loop clients (workers.clients)",
    "downstream.network_delay": "a network delay",
    "downstream.request_delay": "a request delay",
    "downstream.overload.latency_model": "processor sharing (latency_model: {value})",
    "downstream.serve_abandoned": "serving abandoned calls",
    "downstream.refusal_cost": "refusals that cost server time (refusal_cost)",
    "downstream.cache": "a cache in front of the downstream (downstream.cache)",
    **dict.fromkeys([f"downstream.{name}" for name in ("replicas", "balancer",
                                                       "outlier_detection", "health_check")],
                    "replicas behind a balancer (downstream.replicas)"),
    "downstream.discipline": "a LIFO waiting room (discipline: {value})",
    "downstream.lifo_threshold": "a LIFO waiting room (lifo_threshold)",
    "retry.bucket": "a retry bucket",
    "retry.late_answers": "late answers (its workers give up on a call at its timeout)",
    "retry.retry_on": "a choice of the failures retried (retry_on: its workers retry every "
                      "failure)",
    "retry.throttling": "a choice of the answers that throttle (retry.throttling)",
    **dict.fromkeys([f"workload.{name}" for name in ("clients", "interval", "offset",
                                                     "restarts")],
                    "periodic clients (arrivals: periodic: the producer has no offsets stream)"),
    "workload.keys": "keys (client-go's dedup)",
    "workload.key_skew": "keys (client-go's dedup)",
}


@dataclass(frozen=True)
class Only:
    """A field run for the values *ok* accepts; any other is *unless*."""

    ok: Callable[[Any], bool]
    unless: str


def _any(_value: Any) -> bool:
    return True


ANY = Only(_any, "")
NOT_CLIENT = "per-client {noun} (scope: client)"

# The fields the testbed runs for real, by schema path (list indices and service names
# left out). A section listed is its presence; its fields are listed one by one.
RUNS: dict[str, Only] = {
    **dict.fromkeys(("name", "description", "seed", "duration", "bin", "peak_window",
                     "queue"), ANY),
    # the producer: the model's own arrival clock, poison marks, a limited main queue
    **{f"workload.{name}": ANY for name in (
        "arrivals", "rate", "profile", "profile.at", "profile.rate", "profile.ramp",
        "trace", "trace.file", "trace.format", "trace.time_scale", "trace.start",
        "trace.sha256", "burst_size", "backlog", "poison_fraction", "queue_limit", "spikes",
        "spikes.at", "spikes.duration", "spikes.rate")},
    "workers.count": Only(lambda count: count is not None,
                          "open-loop callers (workers.count: null)"),
    "workers.retry_mode": ANY,
    "workers.poll_interval": ANY,
    # the real workers' own turnaround (calibrate.py): the simulation models it, the real
    # workers have it; they add nothing
    "workers.attempt_overhead": ANY,
    # the emulated downstream (testbed/emulator.py)
    **{f"downstream.{name}": ANY for name in (
        "concurrency", "queue_limit", "service.distribution", "service.mean",
        "service.sigma", "timeout", "rate_limit", "rate_limit.rate", "rate_limit.burst",
        "retry_after", "outages", "outages.start", "outages.duration", "outages.mode",
        "outages.error_rate", "outages.factor", "overload.collapse",
        "overload.collapse.window", "overload.collapse.threshold",
        "overload.collapse.load_limit", "overload.collapse.restart_time",
        "overload.latency_per_call")},
    # the workers: the strategy object, Retry-After, the DLQ or redelivery
    **{f"retry.{name}": ANY for name in (
        "preset", "strategy", "base", "cap", "max_retries", "poison_retryable", "params",
        "retry_after", "retry_after_limit", "throttling_base")},
    "dlq.enabled": ANY,
    "dlq.redelivery_delay": ANY,
    # the policies' own breaker and budget, a pool's shared through Redis
    **{f"breaker.{name}": ANY for name in (
        "enabled", "retries_only", "failure_rate_threshold", "window", "window_calls",
        "minimum_calls", "slow_call_threshold", "slow_call_rate_threshold",
        "open_duration", "open_duration_multiplier", "max_open_duration", "half_open_calls",
        "resume_jitter")},
    "breaker.scope": Only(lambda scope: scope != "client", NOT_CLIENT.format(noun="breakers")),
    **{f"budget{name}": ANY for name in (
        "", ".kind", ".preset", ".capacity", ".retry_cost", ".timeout_cost",
        ".throttling_cost", ".failure_cost", ".success_refund", ".credit_on",
        ".refund_retry_cost", ".floor", ".strict", ".window", ".k", ".ratio",
        ".min_per_second")},
    "budget.scope": Only(lambda scope: scope != "client", NOT_CLIENT.format(noun="budgets")),
}

DOWNSTREAM = ("downstream.", "services")  # what ``herdsim serve`` judges (the rest: clients)


@dataclass(frozen=True)
class Setting:
    """A field a scenario sets: its schema path (*key*), where it sits in this scenario
    (*where*: with list indices and service names), its value, and the member it is a
    field of (None: it is no member's)."""

    key: str
    where: str
    value: Any
    member: Member | None


def settings(model: BaseModel, key: str = "", where: str = "") -> Iterator[Setting]:
    """Every field of *model* (a scenario or a section) set to anything but its default,
    depth first in schema order. A section that is always there (``retry``) is not one
    itself, only its fields are; an optional one present, a list or a map not empty is."""
    member = model if isinstance(model, Member) else None
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        required = field.is_required()
        default = None if required else field.get_default(call_default_factory=True)
        if not required and value == default:
            continue
        path, at = f"{key}{name}", f"{where}{name}"
        always = isinstance(value, BaseModel) and not isinstance(value, Member) \
            and (required or default is not None)
        if not always:
            yield Setting(path, at, value, member)
        if isinstance(value, BaseModel):
            yield from settings(value, f"{path}.", f"{at}.")
        elif isinstance(value, (list, dict)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for index, item in items:
                if isinstance(item, Member):  # judged by its declaration, as one alone
                    yield Setting(path, f"{at}.{index}", item, None)
                if isinstance(item, BaseModel):
                    yield from settings(item, f"{path}.", f"{at}.{index}.")


def _refused_place(key: str) -> str | None:
    """The :data:`REFUSED` place *key* is or lies in, if any."""
    parts = key.split(".")
    return next((place for n in range(1, len(parts) + 1)
                 if (place := ".".join(parts[:n])) in REFUSED), None)


def what_is_not_run(setting: Setting) -> str | None:
    """What *setting* is when the testbed does not run it; None when it does."""
    place = _refused_place(setting.key)
    if place is not None:
        return REFUSED[place].format(value=setting.value)
    value = setting.value
    if isinstance(value, Member):
        return None if value.emulated else f"the {value.name()} {value.family.noun}"
    rule = RUNS.get(setting.key)
    if setting.member is not None:  # a member's own field: its declaration decided, unless
        return None if rule is None or rule.ok(value) else rule.unless  # some values only
    if rule is None:
        return "this field yet"
    return None if rule.ok(value) else rule.unless


def refusals(scenario: Scenario, downstream_only: bool = False
             ) -> list[tuple[Setting, str]]:
    """Every setting of *scenario* the testbed (or, *downstream_only*, ``herdsim serve``)
    does not run, with what it is: the most sweeping first (:data:`REFUSED`'s order),
    then in schema order."""
    found = []
    for setting in settings(scenario):
        if downstream_only and not setting.key.startswith(DOWNSTREAM):
            continue  # the client's side: whoever calls ``serve`` plays it
        what = what_is_not_run(setting)
        if what is not None:
            found.append((setting, what))
    order = list(REFUSED)
    return sorted(found, key=lambda item: order.index(place) if (
        place := _refused_place(item[0].key)) is not None else len(order))


def check_supported(scenario: Scenario, downstream_only: bool = False,
                    source: str | None = None) -> None:
    """Refuse, in one line naming the field (in *source*: the scenario's file, or its
    name), what the testbed (or, *downstream_only*, ``herdsim serve``) does not run."""
    found = refusals(scenario, downstream_only)
    if found:
        setting, what = found[0]
        who = "herdsim serve" if downstream_only else "the testbed"
        raise TestbedError(f"{source or scenario.name}: {setting.where}: {who} does not "
                           f"emulate {what}; 'herdsim run' simulates it")

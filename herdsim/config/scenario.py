"""The scenario as a whole: the sections together, and the checks that span them."""

from __future__ import annotations

from typing import Annotated, Literal

import yaml
from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from herdsim.config import graph
from herdsim.config.schema import GatesCalls
from herdsim.config.sections import (
    DLQ,
    Retry,
    Workers,
    Workload,
)
from herdsim.policies import arrivals as sources
from herdsim.policies import budgets, downstreams
from herdsim.policies.adaptive import ClientLimiter
from herdsim.policies.breaker import Breaker, Resilience4j
from herdsim.policies.durations import format_duration
from herdsim.policies.fields import (
    MAX_NAME,
    FieldError,
    Period,
    PositiveDuration,
    Section,
    printable,
)


class Scenario(Section):
    """A whole simulation: what arrives, who works, what they call, how they retry."""

    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str = ""
    seed: int = Field(0, ge=0)
    duration: PositiveDuration
    bin: PositiveDuration = 0.1
    peak_window: Period = 0.01
    queue: str | None = None
    workload: Workload
    workers: Workers = Workers()
    downstream: graph.Caller = graph.Caller()
    retry: Retry = Retry()
    dlq: DLQ = DLQ()
    breaker: Annotated[Breaker, GatesCalls(lambda b: not b.enabled)] = Resilience4j()
    budget: Annotated[budgets.Budget | None, GatesCalls()] = None
    client_limiter: Annotated[ClientLimiter | None, GatesCalls()] = None
    _overrides: dict[str, str] = PrivateAttr(default_factory=dict)
    deadline: Literal["propagate"] | None = Field(
        None, description="propagate: every edge of the call graph passes its caller's "
                          "remaining time down")
    hedging: Annotated[graph.Hedging | None, GatesCalls()] = Field(
        None, description="the workers' calls hedged (gRPC A6) instead of retried")
    services: dict[str, graph.Caller] = Field({}, description="the services tiers call, "
                                                              "by name (a call graph)")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        printable(name, "the name")
        if "/" in name or "\\" in name or name.strip(". ") == "" or name.startswith("."):
            raise ValueError(f"{name!r} cannot name an output directory: no '/', '\\', "
                             "leading '.' or bare dots")
        return name

    @field_validator("services")
    @classmethod
    def _service_names(cls, services: dict[str, graph.Caller]) -> dict[str, graph.Caller]:
        return graph.names_ok(services)

    @field_validator("queue")
    @classmethod
    def _label_value(cls, queue: str | None) -> str | None:
        if queue is not None and not queue.strip():
            raise ValueError("an empty queue label is no label to Prometheus; "
                             "omit it to use the name")
        return None if queue is None else printable(queue, "the queue label")

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.queue is None:
            self.queue = self.name
        self._check_times()
        self._check_callers()
        self._check_retries()
        self._check_late_answers()
        self._check_scaling()
        self._check_spikes()
        graph.check(self.downstream, self.services, self.duration)
        if self.hedging is not None and "retry" in self.model_fields_set:
            raise FieldError("hedging", "the workers hedge or retry, not both (as in gRPC): "
                                        "remove retry")
        return self

    def _check_times(self) -> None:
        """The bin and the outages fit the run."""
        if self.bin < 1e-3:
            raise FieldError("bin", f"bin ({format_duration(self.bin)}) is below 1ms: figures "
                                    "and the Prometheus export sample at millisecond "
                                    "resolution")
        if self.bin > self.duration:
            raise FieldError("bin", f"bin ({format_duration(self.bin)}) is longer than "
                                    f"duration ({format_duration(self.duration)})")
        for i, outage in enumerate(self.downstream.outages):
            if outage.end > self.duration:
                raise FieldError(
                    f"downstream.outages.{i}",
                    f"outage ends at {format_duration(outage.end)}, after the run's "
                    f"end ({format_duration(self.duration)})",
                )
            if outage.needs_timeout and self.downstream.timeout is None:
                raise FieldError(
                    f"downstream.outages.{i}.mode",
                    f"a {outage.name()} outage needs downstream.timeout (calls hang until it)",
                )

    def _check_callers(self) -> None:
        """Clients, scopes and retry modes the callers (a pool or open loop) can have."""
        clients = self.workers.clients is not None
        if clients and self.workers.count is not None:
            raise FieldError("workers.clients",
                             "clients group open-loop callers: set workers.count: null")
        for section, mitigation in (("breaker", self.breaker if self.breaker.enabled else None),
                                    ("budget", self.budget),
                                    ("client_limiter", self.client_limiter)):
            if mitigation is not None and mitigation.scope == "client" and not clients:
                raise FieldError(f"{section}.scope",
                                 "scope client needs workers.clients (open-loop callers "
                                 "grouped into clients)")
        if self.breaker.enabled and self.budget is not None and self.budget.gates_every_call:
            raise FieldError("budget.kind", "an envoy budget counts every call sent and "
                                            "the breaker may stop one after it is counted: "
                                            "use one of them")
        if self.workers.count is None:
            if self.workers.retry_mode == "requeue":
                raise FieldError("workers.retry_mode",
                                 "open-loop callers (workers.count: null) have no queue to "
                                 "requeue to; use sleep")
            if self.breaker.enabled and self.breaker.scope == "worker":
                raise FieldError("breaker.scope",
                                 "open-loop callers share one breaker: use scope: pool "
                                 "(or client, with workers.clients)")
            if self.client_limiter is not None and self.client_limiter.scope == "worker":
                raise FieldError("client_limiter.scope",
                                 "open-loop callers share one client: use scope: pool "
                                 "(or client, with workers.clients)")
            if self.budget is not None and self.budget.scope == "worker":
                raise FieldError("budget.scope",
                                 "open-loop callers share one budget: use scope: pool "
                                 "(or client, with workers.clients)")

    def _check_retries(self) -> None:
        """No job can retry forever at one instant."""
        if self._may_freeze():
            raise FieldError(
                "workers.attempt_overhead",
                f"retry.strategy {self.retry.strategy!r} may retry at once and retries are "
                "unlimited: against a fast failure simulated time would stand still; set "
                "workers.attempt_overhead (what one attempt costs the client, e.g. 1ms)")

    def _check_late_answers(self) -> None:
        """Late answers need a timeout to be late after, and the loop that hears them
        (:mod:`herdsim.model.late`) runs without what it does not model."""
        if not self.retry.late_answers:
            return
        ds = self.downstream
        refused = (
            (ds.timeout is None, "need a client timeout (downstream.timeout): without one "
                                 "no answer is late"),
            (not downstreams.named(ds.model).queueing,
             f"need a queueing model (downstream.model is {ds.model})"),
            (ds.overload.latency_model != "at_start",
             "need downstream.overload.latency_model: at_start"),
            (ds.network_delay is not None or ds.request_delay is not None,
             "are not modelled across a network (downstream.network_delay, request_delay)"),
            (graph.has_graph(ds, self.services, self.hedging),
             "are not modelled in a call graph or with hedging (downstream.calls, services, "
             "hedging)"),
            (self.workers.retry_mode != "sleep", "need workers.retry_mode: sleep"),
            (self.workload.keys is not None, "are not modelled with workload.keys"),
            (ds.cache is not None, "are not modelled behind a cache (downstream.cache: a "
                                   "miss's call is the cache's, not a job's)"))
        for wrong, problem in refused:
            if wrong:
                raise FieldError("retry.late_answers", f"late answers {problem}")

    def _check_scaling(self) -> None:
        """An autoscaled pool starts within its bounds; occ has clients, not a pool (nor
        a main queue for keys)."""
        scaling = self.workers.autoscale
        model = downstreams.named(self.downstream.model)
        if scaling is not None:
            if self.workers.count is None:
                raise FieldError("workers.autoscale", "open-loop callers are not a pool to "
                                                      "scale; set workers.count")
            if not scaling.min <= self.workers.count <= scaling.max:
                raise FieldError("workers.count", f"{self.workers.count} workers at t=0 is "
                                                  f"outside autoscale's min..max "
                                                  f"({scaling.min}..{scaling.max})")
            if not model.queue_workers:
                raise FieldError("workers.autoscale", f"the {model.name()} model has no "
                                                      "queue workers to scale")
        if not model.queue_workers and self.workers.count is None:
            raise FieldError("workers.count", f"the {model.name()} model needs a number of "
                                              "clients")
        if self.workload.keys is not None and (self.workers.count is None
                                               or not model.queue_workers):
            raise FieldError("workload.keys", "keys collapse jobs in the main queue: they "
                                              "need queue workers (workers.count) and the "
                                              "queue model")
        load = self.workload
        shaped = [name for name, on in (("arrivals", load.arrivals != sources.FAMILY.default),
                                        ("profile", load.profile), ("spikes", load.spikes)) if on]
        if not model.queue_workers and shaped:
            raise FieldError(f"workload.{shaped[0]}", f"the {model.name()} model does not "
                             f"read workload.{shaped[0]}: its clients (workers.count) all "
                             "start at t=0 (remove it)")
        if self.workload.criticality is not None and not (model.queueing
                                                          and model.queue_workers):
            raise FieldError("workload.criticality", f"criticality classes order a waiting "
                                                     f"room: the {model.name()} model has none")

    def _check_spikes(self) -> None:
        """Spikes start within the run and do not overlap."""
        previous_end = None
        for i, spike in sorted(enumerate(self.workload.spikes), key=lambda item: item[1].at):
            if spike.at >= self.duration:
                raise FieldError(f"workload.spikes.{i}.at", "spike starts after the run's end")
            if previous_end is not None and spike.at < previous_end:
                raise FieldError(f"workload.spikes.{i}.at",
                                 "spikes overlap; give each window its own rate")
            previous_end = spike.at + spike.duration

    def _may_freeze(self) -> bool:
        """Could a job retry forever at one instant? A zero-wait strategy (``min_sleep``
        0), unlimited retries, nothing that costs time per attempt (overhead, network, a
        poller), and something that fails fast (down, 429, a full waiting room, a crash,
        an open-loop caller's open breaker)."""
        ds, workers = self.downstream, self.workers
        if self.retry._untrusted:  # read, not run: its code is never imported
            return False
        if (getattr(self.retry.build(), "min_sleep", None) != 0.0
                or self.retry.max_retries is not None or workers.attempt_overhead
                or ds.network_delay is not None or ds.request_delay is not None
                or (workers.count is not None and workers.retry_mode == "requeue")):
            return False
        return (any(o.refuses for o in ds.outages) or ds.rate_limit is not None
                or ds.defends()
                or ds.queue_limit is not None or ds.overload.collapse is not None
                or (workers.count is None and self.breaker.enabled))

    @property
    def overrides(self) -> dict[str, str]:
        """``path -> value`` as ``--set`` (or ``load_scenario``'s *overrides*) changed
        them when the scenario was loaded, as written; empty when nothing was."""
        return dict(self._overrides)

    def __eq__(self, other: object) -> bool:
        """Equal fields make equal scenarios, however each was loaded (its overrides)."""
        if not isinstance(other, Scenario):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as every pydantic model

    def overridden(self, changes: dict[str, str]) -> Scenario:
        """This scenario, recording *changes* as its :attr:`overrides`."""
        self._overrides = dict(changes)
        return self

    @property
    def all_outages(self) -> list:
        """The outages of the downstream and then of every service (a call graph's)."""
        return [o for tier in (self.downstream, *self.services.values()) for o in tier.outages]

    @property
    def outage_windows(self) -> list[tuple[float, float]]:
        return [(o.start, o.end) for o in self.all_outages]

    @property
    def first_outage_start(self) -> float | None:
        """When the first outage starts, at any tier (None without an outage)."""
        return min((o.start for o in self.all_outages), default=None)

    @property
    def last_outage_end(self) -> float | None:
        """When the last outage ends, at any tier (None without an outage)."""
        return max((o.end for o in self.all_outages), default=None)

    def to_dict(self) -> dict:
        """Plain data (seconds as numbers), ready for YAML or JSON."""
        return graph.strip_unset(self.model_dump(mode="json"))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

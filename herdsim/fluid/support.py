"""What the fluid model can represent: a mechanism it cannot is refused in one line naming
it, never guessed. A family member without a fluid form (its ``fluid`` declaration is
None) is refused by that declaration; so is a retry strategy without one. Beyond the
declarations, this model implements one tier of a FIFO queue downstream with sleeping
queue workers or open-loop callers; what it does not implement yet (a breaker, a budget,
an admission limiter ...) is refused naming the field, by the same rule the workers'
fast path uses (the fields marked :class:`~herdsim.config.schema.GatesCalls`)."""

from __future__ import annotations

from herdsim.config.scenario import Scenario
from herdsim.config.schema import gates, member_places, value_at
from herdsim.errors import ScenarioError
from herdsim.policies.family import Member

# settings beyond the gates this model does not represent: path -> (off?, what it is)
NOT_YET = {
    "downstream.model": (lambda v: v == "queue", "a downstream model other than queue"),
    "downstream.discipline": (lambda v: v == "fifo", "a discipline other than fifo"),
    "downstream.retry_after": (lambda v: v != "limiter", "the rate limiter's own "
                                                         "Retry-After"),
    "downstream.network_delay": (lambda v: v is None, "a network delay"),
    "downstream.request_delay": (lambda v: v is None, "a request delay"),
    "downstream.codel": (lambda v: v is None, "CoDel"),
    "downstream.shedding": (lambda v: v is None, "shedding"),
    "downstream.admission": (lambda v: v is None, "an admission limiter"),
    "downstream.overload.latency_per_call": (lambda v: v == 0, "latency_per_call"),
    "dlq.enabled": (lambda v: v, "redelivery without a DLQ"),
    "services": (lambda v: not v, "a call graph"),
    "deadline": (lambda v: v is None, "deadline propagation"),
}


def check(scenario: Scenario) -> None:
    """Raise a one-line :class:`ScenarioError` naming the first mechanism of *scenario*
    the fluid model cannot represent."""
    problem = _first(scenario)
    if problem is not None:
        path, what, why = problem
        raise ScenarioError([(path, f"herdsim predict cannot represent {what} ({why}): "
                                    "run it with herdsim run")])


def _first(scenario: Scenario) -> tuple[str, str, str] | None:
    none, later = "it declares no fluid form", "not in the fluid model yet"
    for path in member_places(type(scenario)):
        member = value_at(scenario, path)
        if isinstance(member, Member) and member.fluid is None:
            return path, f"{member.family.noun} {member.name()}", none
    for i, outage in enumerate(scenario.downstream.outages):
        if outage.fluid is None:
            return f"downstream.outages.{i}", f"outage {outage.name()}", none
    strategy = scenario.retry.build()
    if strategy.fluid is None or getattr(strategy, "cdf", None) is None:
        return "retry.strategy", f"the {scenario.retry.strategy} strategy", none
    for path, off in gates(type(scenario)).items():
        value = value_at(scenario, path)
        if path == "budget" and value is not None and value.fluid_gate(1e-3) is not None:
            continue  # a budget with a fluid gate: a limit on the retry flow
        if path == "retry.retry_after":
            continue  # a fixed hint heeded: the hint's sleep kernels (inputs.hint_kernels)
        if path == "breaker" and value.fluid_gate(1e-3, 1) is not None \
                and not value.resume_jitter:
            continue  # a breaker with a fluid gate: calls held while open
        if not off(value):
            return path, path.rsplit(".", 1)[-1].replace("_", " "), later
    for path, (off, what) in NOT_YET.items():
        if not off(value_at(scenario, path)):
            return path, what, later
    if scenario.downstream.timeout is None and any(o.needs_timeout for o in
                                                   scenario.downstream.outages):
        return "downstream.timeout", "a blackhole without a timeout", later
    return None

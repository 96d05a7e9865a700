"""Time dilation (``herdsim testbed --dilate K``): the scenario slowed down K times.

Every duration × K, every rate ÷ K: the dilated scenario is the same system watched
through a slower clock, so every count it produces is the scenario's, every time is K
times the scenario's and every rate 1/K of it. The testbed runs the dilated scenario for
real (a loaded machine's milliseconds of lateness weigh K times less against its timers)
and reports the results back in the scenario's own units (:func:`undilated`).

A duration is a field parsed as one (``parse_duration``: every ``*Duration`` and
``Period`` field, ``retry_after``); a rate is a field in :data:`RATES`. A field whose
unit the scenario does not say (``retry.params``: the strategy's own) is refused.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, BeforeValidator

from herdsim.config.scenario import Scenario
from herdsim.errors import TestbedError
from herdsim.policies.durations import parse_duration

RATES = frozenset({"rate", "min_per_second"})  # per-second fields, by name
MAX_DILATION = 100.0  # a run K times longer: beyond this, an hour-long real run


def _parses_duration(metadata) -> bool:
    return any(isinstance(m, BeforeValidator) and (
        m.func is parse_duration or getattr(m.func, "__name__", "") == "_retry_after")
        for m in metadata)


def _annotated_duration(annotation: Any) -> bool:
    """*annotation* (``PositiveDuration | None`` …) holds a duration."""
    if _parses_duration(getattr(annotation, "__metadata__", ())):
        return True
    return any(_annotated_duration(arg) for arg in get_args(annotation))


def _is_duration(field) -> bool:
    return _parses_duration(field.metadata) or _annotated_duration(field.annotation)


def _walk(model: BaseModel, k: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out[name] = _walk(value, k)
        elif isinstance(value, list):
            out[name] = [_walk(v, k) if isinstance(v, BaseModel) else v for v in value]
        elif isinstance(value, dict):
            out[name] = {key: _walk(v, k) if isinstance(v, BaseModel) else v
                         for key, v in value.items()}
        elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                and _is_duration(field):
            out[name] = value * k
        elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                and name in RATES:
            out[name] = value / k
        elif name == "time_scale":  # a trace's times, scaled
            out[name] = value * k
        else:
            out[name] = value
    return out


def dilate(scenario: Scenario, k: float) -> Scenario:
    """*scenario* with every duration × *k* and every rate ÷ *k* (``k == 1``: itself)."""
    if not 1.0 <= k <= MAX_DILATION:
        raise TestbedError(f"--dilate {k:g}: a factor from 1 to {MAX_DILATION:g}")
    if k == 1.0:
        return scenario
    if scenario.retry.params:
        raise TestbedError(f"{scenario.name}: retry.params: --dilate does not know the "
                           "units of a strategy's own parameters; set them without params "
                           "or run without --dilate")
    data = _walk(scenario, k)
    return Scenario.model_validate(data)

"""The ground every scenario field stands on: the :class:`Section` base (unknown fields,
NaN/inf, booleans for numbers and numbers beyond :data:`LIMIT` refused in one place),
durations, fractions, and :class:`FieldError` for a check that knows which field to blame.

Pydantic only: the families' members (``herdsim/policies/*``) and the scenario
(``herdsim/config``) both build on it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from herdsim.policies.durations import json_schema, parse_duration

RESOLUTION = 1e-6  # 1us: a period repeated over a run must advance the clock


class FieldError(ValueError):
    """A cross-field problem that knows which field to blame."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def number_text(value: float) -> str:
    """A number in a message, however large (``10**400`` has no float form)."""
    if isinstance(value, int) and len(digits := str(abs(value))) > 15:
        return f"{'-' if value < 0 else ''}{digits[:3]}… ({len(digits)} digits)"
    return f"{value:g}"


def _resolvable(seconds: float) -> float:
    if 0 < seconds < RESOLUTION:
        raise ValueError(f"{seconds:g} s is below 1us, herdsim's time resolution")
    return seconds


PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0),
                             WithJsonSchema(json_schema(exclusive=True))]
Period = Annotated[PositiveDuration, AfterValidator(_resolvable)]  # a step repeated all run
NonNegativeDuration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0),
                                WithJsonSchema(json_schema(exclusive=False))]
Fraction = Annotated[float, Field(ge=0, le=1)]


LIMIT = 1e9  # no number that sizes a run (seconds, rates, counts) may exceed this
# Counts that multiply a run's work (docs/scenarios.md, "Bounds"); the rest are held to
# fields.LIMIT. More than any pool, client, room or bucket a scenario models:
MAX_WORKERS = 1_000_000
MAX_BACKLOG = 100_000_000  # jobs queued at t=0
MAX_RETRIES = 1_000  # retries of one call (the libraries' defaults: 0 to 25, or none)
MAX_NAME = 100  # characters of a scenario name (it names output directories)
MAX_CACHE_SIZE = 10_000_000  # entries of one cache (~100 bytes each: 1 GB at most)
MAX_CACHE_KEYS = 1_000_000_000  # keys a cache's requests range over
MAX_KEY_TABLE = 1_000_000  # keys whose weights are tabled (a skewed draw below alpha 1.1)
_UNBOUNDED = frozenset({"seed"})


def _admits_bool(annotation: Any) -> bool:
    """True when *annotation* (``bool``, ``bool | None``, ``Any`` …) accepts a boolean."""
    if annotation is bool or annotation is Any:
        return True
    return any(_admits_bool(arg) for arg in getattr(annotation, "__args__", ()))


def printable(text: str, what: str) -> str:
    """*text* unless it holds control characters (ANSI escapes, newlines, NUL …)."""
    bad = next((ch for ch in text if not ch.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{what} holds the control character {bad!r}")
    return text


class Section(BaseModel):
    """Base of every section: unknown fields, NaN/inf, booleans given for numbers and
    numbers beyond :data:`LIMIT` are refused in one place, for every field."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if not _admits_bool(annotation) and annotation is not str:
                raise ValueError("expected a number, not a boolean")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _bounded(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and info.field_name not in _UNBOUNDED and abs(value) > LIMIT:
            raise ValueError(f"{number_text(value)} is beyond {LIMIT:g}, the largest number "
                             "herdsim accepts for a duration, rate or count")
        return value

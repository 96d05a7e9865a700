"""The scenario schema read as data: its sections, field paths, durations and gates.

Written once here for everyone who walks the schema: ``--set`` and its suggestions, the
scenario described in words, a sweep's axis units, the docs test, and the worker loop's
choice of its fast path (:class:`GatesCalls`). A field path is dotted from the root
model; list items' indices (``downstream.outages.0.duration``) are skipped.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

from herdsim.policies.durations import parse_duration
from herdsim.policies.family import Family, Member


class GatesCalls:
    """Field metadata (``Annotated[T, GatesCalls()]``): the field turns on a feature that
    gates or shapes a worker's or an open-loop caller's call, so any value but an off one
    takes the general loop. *off(value)* says whether the feature is off; by default, when the value
    is the field's default."""

    def __init__(self, off: Callable[[Any], bool] | None = None):
        self.off = off


def nested(annotation: Any) -> Iterator[Any]:
    """Everything nested in a type annotation (union members, ``Annotated`` metadata)."""
    for arg in typing.get_args(annotation):
        yield arg
        yield from nested(arg)


def section_type(annotation: Any) -> type[BaseModel] | None:
    """The section (a pydantic model) a field holds, alone, optional or in a list; for a
    family's member, every member's fields in one (:attr:`Family.fields`)."""
    for candidate in nested(annotation):
        if isinstance(candidate, Family):
            return candidate.fields
    for candidate in (annotation, *nested(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Member):
            return candidate.family.fields  # a required union: pydantic keeps the family
            # in the field's metadata, not in its annotation
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def field_at(root: type[BaseModel], path: str) -> FieldInfo | None:
    """The field at a dotted *path* from *root*, or None when there is none. List indices
    are skipped, and so is the key of a map of sections (``services.db.concurrency``)
    unless the path names the section's field at once (``services.concurrency``, as
    :func:`fields` writes it)."""
    model: type[BaseModel] | None = root
    field = None
    key_next = False
    for part in path.split("."):
        named = model is not None and part in model.model_fields
        if part.isdigit() or (key_next and not named):
            key_next = False
            continue
        if model is None or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        model = section_type(field.annotation)
        key_next = model is not None and typing.get_origin(field.annotation) is dict
    return field


def model_at(root: type[BaseModel], path: str) -> type[BaseModel] | None:
    """The section at a dotted *path* from *root* (*root* itself for ``""``), if any."""
    if not path:
        return root
    field = field_at(root, path)
    return section_type(field.annotation) if field is not None else None


def is_duration(field: FieldInfo) -> bool:
    """Whether *field* holds (an optional) duration: parsed by ``parse_duration``."""
    hints = [*field.metadata, *nested(field.annotation)]
    return any(isinstance(h, BeforeValidator) and h.func is parse_duration for h in hints)


def fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """``(dotted path, field)`` for every field of *model* and of its sections."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path, field
        section = section_type(field.annotation)
        if section is not None:
            yield from fields(section, f"{path}.")


def gates(model: type[BaseModel]) -> dict[str, Callable[[Any], bool]]:
    """``path -> off(value)`` for every field of *model* marked :class:`GatesCalls`, but
    those inside a list or a map (an edge of the call graph gates its own calls, not a
    queue worker's)."""
    found = {}
    for path, field in fields(model):
        if _in_container(model, path):
            continue
        for mark in field.metadata:
            if isinstance(mark, GatesCalls):
                found[path] = mark.off or _is(field.default)
    return found


def member_places(model: type[BaseModel]) -> list[str]:
    """The paths of the fields of *model* that hold a family's member, but those inside a
    list or a map (as :func:`gates`): where a member may take the workers off their fast
    path (:meth:`~herdsim.policies.family.Member.keeps_fast_path`)."""
    return [path for path, field in fields(model) if not _in_container(model, path)
            and typing.get_origin(field.annotation) not in (list, dict)
            and any(isinstance(mark, Family)
                    for mark in (*nested(field.annotation), *field.metadata))]


def _in_container(model: type[BaseModel], path: str) -> bool:
    """Whether a field on *path* lies inside a list or a map of sections."""
    parts = path.split(".")
    for depth in range(1, len(parts)):
        field = field_at(model, ".".join(parts[:depth]))
        if field is not None and typing.get_origin(field.annotation) in (list, dict):
            return True
    return False


def _is(default: Any) -> Callable[[Any], bool]:
    """``off(value)``: whether *value* is *default*."""
    return lambda value: value == default


def value_at(data: Any, path: str) -> Any:
    """The value at a dotted *path* of a validated model (None past a section that is)."""
    for part in path.split("."):
        if data is None:
            return None
        data = data[int(part)] if part.isdigit() else getattr(data, part)
    return data

"""What the fluid model can represent: every setting of a scenario that differs from its
default must be one the model reads (the allow-list, :mod:`herdsim.fluid.reads`); the
first that is not is refused in one line naming its path and what it is, never guessed.
A feature new to the scenario is refused until the model implements it and lists it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from herdsim.config.scenario import Scenario
from herdsim.errors import ScenarioError
from herdsim.fluid.reads import MEMBERS, READS
from herdsim.fluid.reads import UNREAD as WORDS
from herdsim.policies.family import Member

UNREAD = "the fluid model does not read it"
REQUIRED = object()  # a required field's default: none, so any value it holds is set


def check(scenario: Scenario) -> None:
    """Raise a one-line :class:`ScenarioError` naming the first setting of *scenario* the
    fluid model does not read."""
    problem = first_unread(scenario)
    if problem is not None:
        path, what = problem
        raise ScenarioError([(path, f"herdsim predict cannot represent {what}: run it "
                                    "with herdsim run")])


def first_unread(scenario: Scenario) -> tuple[str, str] | None:
    """``(path, what it is)`` of the first setting of *scenario* the model does not read,
    or None."""
    for path, value, owner in set_paths(scenario):
        problem = _unread(path, value, owner, scenario)
        if problem is not None:
            return problem
    return None


def _unread(path: str, value: Any, owner: BaseModel, scenario: Scenario
            ) -> tuple[str, str] | None:
    if isinstance(value, Member):
        noun = f"{value.family.noun} {value.name()}"
        place = plain(path)
        if place not in MEMBERS and place in WORDS:
            return path, f"{WORDS[place]}, {_article(noun)} {noun} ({UNREAD})"
        spec = MEMBERS.get(place, {}).get(value.name())
        if spec is None:
            why = "it declares no fluid form" if value.fluid is None else \
                "its fluid form is not in the fluid model yet"
            return path, f"{_article(noun)} {noun} ({why})"
        lacks = spec.lacks(value, scenario)
        return None if lacks is None else (f"{path}.{lacks[0]}", lacks[1])
    name = path.rsplit(".", 1)[-1]
    if isinstance(owner, Member):
        spec = MEMBERS.get(plain(path.rsplit(".", 1)[0]), {}).get(owner.name())
        if spec is not None and name in spec.fields:
            return None
        return path, f"{name} = {_shown(value)} of {_article(owner.name())} " \
                     f"{owner.name()} {owner.family.noun} ({UNREAD})"
    rule = READS.get(plain(path))
    if rule is None:
        setting = plain(path) if isinstance(value, BaseModel) else \
            f"{plain(path)} = {_shown(value)}"  # a section is named, not printed
        if plain(path) in WORDS:
            return path, f"{WORDS[plain(path)]} ({setting}; {UNREAD})"
        return path, f"{setting} ({UNREAD})"
    ok, what = rule
    return None if ok(value, scenario) else (path, what.format(_shown(value)))


def plain(path: str) -> str:
    """*path* without its list indices (``downstream.outages.0.start`` →
    ``downstream.outages.start``): the allow-list's key."""
    return ".".join(part for part in path.split(".") if not part.isdigit())


def set_paths(model: BaseModel, prefix: str = "", against: BaseModel | None = None
              ) -> Iterator[tuple[str, Any, BaseModel]]:
    """``(path, value, owner)`` of every setting of *model* that differs from its default
    (*against*'s value, else the field's default), *owner* the section holding it: a
    section or member set in place of another (or of none) comes first, then its own
    fields against its own defaults; a list of sections, then each item."""
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        default = getattr(against, name) if against is not None else REQUIRED \
            if field.is_required() else field.get_default(call_default_factory=True)
        yield from _differ(prefix + name, value, default, model)


def _differ(path: str, value: Any, default: Any, owner: BaseModel
            ) -> Iterator[tuple[str, Any, BaseModel]]:
    if isinstance(value, BaseModel):
        if type(default) is not type(value):
            yield path, value, owner
            default = None
        yield from set_paths(value, path + ".", default)
    elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
        yield path, value, owner
        for i, item in enumerate(value):
            yield from _differ(f"{path}.{i}", item, None, owner)
    elif default is REQUIRED or value != default:
        yield path, value, owner


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"

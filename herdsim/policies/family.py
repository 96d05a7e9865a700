"""Families of mechanisms: every choice a scenario makes by a tag (an outage's ``mode``, an
admission limiter's ``kind`` …) is one :class:`Member` of one :class:`Family`.

A member is one module in its family's package and owns three things:

* its **config**: a pydantic section with its tag and only its own fields, so a field the
  chosen member does not read is an error naming it ("only a slow outage has a factor");
* its **rule**: pure Python and numpy, no SimPy (a method such as ``build`` or ``factor``);
* its **declarations** (class variables): whether it keeps the workers' fast path,
  whether the testbed and ``herdsim serve`` can run it for real, and its fluid form for
  a mean-field model (or ``None``: it has none).

A :class:`Family` is the registry of its members: it yields the discriminated union the
scenario's field uses, the CLI listing (``herdsim families``), the docs table and, through
the union, the JSON Schema (``herdsim schema``). Adding a member is a module with its
class, listed in its family's ``FAMILY``, and its test.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, ClassVar, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Tag,
    ValidationInfo,
    create_model,
    model_validator,
)

from herdsim.policies.fields import FieldError, Section

TAG_MARK = "="  # a location part ``mode=slow`` is the union's choice, not a field


class Member(Section):
    """One member's config, with its declarations as class variables."""

    family: ClassVar[Family]
    about: ClassVar[str] = ""  # one line: the listing and the docs table
    fast_path: ClassVar[bool] = True  # False: a scenario using it leaves the fast loops
    emulated: ClassVar[bool] = False  # the testbed and ``serve`` run it for real
    fluid: ClassVar[str | None] = None  # its form in a mean-field model; None: it has none

    @classmethod
    def name(cls) -> str:
        """The tag that chooses this member (``slow``)."""
        return typing.get_args(cls.model_fields[cls.family.tag].annotation)[0]

    def keeps_fast_path(self) -> bool:
        """Whether a scenario holding this member keeps the workers' fast loops (its
        ``fast_path``; a member that can be off says so by its settings)."""
        return self.fast_path

    @model_validator(mode="before")
    @classmethod
    def _only_its_own_fields(cls, data: Any, info: ValidationInfo) -> Any:
        return cls.own_fields(data, info)

    @classmethod
    def own_fields(cls, data: Any, info: ValidationInfo) -> Any:
        """*data* without another member's fields, each refused naming who reads it (null
        is unset: how older herdsim wrote every member's fields). A run folder's sealed
        scenario (read with ``sealed`` in the context) written by an older herdsim holds
        every member's fields with their defaults: there they are dropped (the run did
        not read them)."""
        if not isinstance(data, dict):
            return data
        sealed = (info.context or {}).get("sealed", False)
        kept = {}
        for key, value in data.items():
            owners = [] if key in cls.model_fields or not isinstance(key, str) else \
                [m.name() for m in cls.family.members if key in m.model_fields]
            if owners and value is not None and not sealed:
                raise FieldError(key, cls.family.only(owners, key, cls.name()))
            if not owners:
                kept[key] = value
        return kept


@dataclass(frozen=True)
class Family:
    """The members chosen by one tag field (``tag``), the first of them by default when
    ``default`` is set (a tag a scenario may leave out)."""

    name: str  # the family's name in listings: "outage mode"
    noun: str  # what one member is in a sentence: "outage"
    tag: str  # the field that chooses: "mode"
    members: tuple[type[Member], ...]
    default: str | None = None

    def __post_init__(self) -> None:
        for member in self.members:
            member.family = self

    def names(self) -> list[str]:
        """The members' tags, in listing order."""
        return [m.name() for m in self.members]

    def member(self, name: str) -> type[Member]:
        """The member *name* chooses."""
        return next(m for m in self.members if m.name() == name)

    def only(self, owners: list[str], key: str, this: str) -> str:
        """``only a slow outage has a factor (this one is mode: down)``."""
        who = owners[0] if len(owners) == 1 else ", ".join(owners[:-1]) + " or " + owners[-1]
        return f"only {_article(who)} {who} {self.noun} has {key} (this one is " \
               f"{self.tag}: {this})"

    def union(self) -> Any:
        """The annotation of a field holding one member: a discriminated union on the tag,
        its choice checked first so an unknown tag names the ones there are."""
        choices = tuple(Annotated[m, Tag(f"{self.tag}{TAG_MARK}{m.name()}")]
                        for m in self.members)
        return Annotated[Union[choices],  # noqa: UP007 (a tuple of members)
                         Discriminator(self._choice), BeforeValidator(self._known), self]

    @cached_property
    def fields(self) -> type[BaseModel]:
        """Every member's fields in one model: what a walk of the schema (field paths,
        ``--set``, suggestions) sees of the family."""
        merged: dict[str, Any] = {}
        for member in self.members:
            for name, field in member.model_fields.items():
                merged.setdefault(name, (field.annotation, field))
        return create_model("".join(w.title() for w in self.noun.split()) + "Fields",
                            **merged)

    def _choice(self, value: Any) -> str:
        name = value.get(self.tag, self.default) if isinstance(value, dict) \
            else getattr(value, self.tag)
        return f"{self.tag}{TAG_MARK}{name}"

    def _known(self, value: Any) -> Any:
        if isinstance(value, self.members):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"expected a section (a mapping), got {value!r}")
        name = value.get(self.tag, self.default)
        if name is None:
            raise FieldError(self.tag, "required field is missing (one of "
                             + ", ".join(self.names()) + ")")
        if name not in self.names():
            raise FieldError(self.tag, f"unknown {self.tag} {name!r}: one of "
                             + ", ".join(self.names()))
        return value

    def flat(self, data: Any, info: ValidationInfo) -> Any:
        """For a section holding its member's tag and fields flat among its own
        (``downstream.model`` beside ``occ``; ``workload.arrivals`` beside ``trace``): the
        checks of :meth:`union` and :class:`Member` on *data*, the section's input."""
        if not isinstance(data, dict):
            return data
        name = self._known(data).get(self.tag, self.default)
        member = self.member(name)
        kept = member.own_fields(data, info)
        for key, field in member.model_fields.items():
            if field.is_required() and kept.get(key) is None:
                raise FieldError(key, f"required field is missing ({self.tag}: {name})")
        return {**{k: v for k, v in data.items() if v is None}, **kept}  # the section's

    def rows(self) -> Iterator[tuple[str, str, str, str, str]]:
        """``(member, about, fast path, emulated, fluid form)`` for listings and docs."""
        for m in self.members:
            yield (m.name(), m.about, "yes" if m.fast_path else "no",
                   "yes" if m.emulated else "no", m.fluid or "none")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"

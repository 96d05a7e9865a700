"""The waiting room's discipline: which end of the room a freed slot serves from, given
the room's depth. A family whose tag is the downstream's ``discipline`` field itself (the
YAML keeps ``discipline: adaptive_lifo`` and ``lifo_threshold`` beside it), so a member is
read from the downstream's flat fields by :func:`of`.

Each member declares ``always``, the end it always serves (False: the oldest, True: the
newest), or None when it depends on the depth, and then answers :meth:`Discipline.newest`:
the engine reads ``always`` once, at construction, so a FIFO room asks nothing per call.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, cast

from pydantic import Field, ValidationError

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import FieldError


class Discipline(Member):
    """A waiting room's order."""

    always: ClassVar[bool | None]  # the end always served (True: newest), None: by depth
    fast_path: ClassVar[bool] = True  # the server's order, not the workers' loop

    def newest(self, depth: int) -> bool:
        """Whether a freed slot takes the newest waiting call, *depth* calls waiting."""
        return bool(self.always)


class Fifo(Discipline):
    """``discipline: fifo`` (the default): the oldest call first."""

    discipline: Literal["fifo"] = "fifo"
    always: ClassVar[bool | None] = False
    about: ClassVar[str] = "the oldest waiting call first"
    emulated: ClassVar[bool] = True
    fluid: ClassVar[str | None] = "a call waits depth / service rate"


class Lifo(Discipline):
    """``discipline: lifo``: the newest call first."""

    discipline: Literal["lifo"]
    always: ClassVar[bool | None] = True
    about: ClassVar[str] = "the newest waiting call first"


class AdaptiveLifo(Discipline):
    """``discipline: adaptive_lifo``: FIFO until ``lifo_threshold`` calls wait, then LIFO
    (Facebook's "Fail at Scale")."""

    discipline: Literal["adaptive_lifo"]
    lifo_threshold: int = Field(ge=1, description="the depth from which the room is LIFO")
    always: ClassVar[bool | None] = None
    about: ClassVar[str] = "the oldest first until lifo_threshold calls wait, then the newest"

    def newest(self, depth: int) -> bool:
        return depth >= self.lifo_threshold


FAMILY = Family("waiting-room discipline", "waiting room", "discipline",
                (Fifo, Lifo, AdaptiveLifo), default="fifo")


def of(section: Any) -> Discipline:
    """The member a downstream *section*'s ``discipline`` and the fields beside it choose;
    a field the member does not read, or one it needs and misses, is a :class:`FieldError`
    on that field."""
    name = getattr(section, FAMILY.tag)
    given = {field: value for field in FAMILY.fields.model_fields
             if (value := getattr(section, field, None)) is not None}
    try:
        return cast(Discipline, FAMILY.member(name).model_validate(given))
    except ValidationError as exc:
        error = exc.errors()[0]
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, FieldError):
            raise cause from None
        field = str(error["loc"][0]) if error["loc"] else FAMILY.tag
        message = (f"is required by {FAMILY.tag}: {name}" if error["type"] == "missing"
                   else error["msg"])
        raise FieldError(field, message) from None

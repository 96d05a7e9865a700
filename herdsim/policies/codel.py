"""CoDel for a server's waiting room, as Facebook runs it ("Fail at Scale", 2015): while the
room has not been empty for ``interval``, a call that waited longer than ``target`` is
rejected instead of served. A one-member family (``kind: facebook``, the default)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Family, Member
from herdsim.policies.fields import PositiveDuration


class Facebook(Member):
    """``kind: facebook`` (the default): Facebook's CoDel for the waiting room."""

    kind: Literal["facebook"] = "facebook"
    target: PositiveDuration = Field(0.005, description="a call waiting longer is rejected "
                                                        "once the room stands")
    interval: PositiveDuration = Field(0.1, description="the room stands when it has not been "
                                                        "empty for this long")
    about: ClassVar[str] = "reject calls that waited over target once the room has stood " \
                           "for interval (Facebook, Fail at Scale)"
    fluid: ClassVar[str | None] = "a standing room's wait held near target; the excess " \
                                  "rejected"

    def drops(self, waited: float, standing: float) -> bool:
        """Whether a call that *waited* this long is rejected, the room standing (not
        empty) for *standing* seconds."""
        return waited > self.target and standing >= self.interval


FAMILY = Family("CoDel", "CoDel", "kind", (Facebook,), default="facebook")
Codel = FAMILY.union()

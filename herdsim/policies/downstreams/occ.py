"""``model: occ``: the optimistic-concurrency row of the AWS 2015 simulator, its clients'
attempts hopping to the row and conflicting (herdsim/model/downstream/occ.py), with its
own fields under ``downstream.occ``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.downstreams.base import Model
from herdsim.policies.fields import MAX_RETRIES, NonNegativeDuration, PositiveDuration, Section


class OccFields(Section):
    """``downstream.occ``: the row's hops and the strategy's first attempt."""

    hop_mean: PositiveDuration = 0.010
    hop_sd: NonNegativeDuration = 0.002
    first_attempt: int = Field(0, ge=0, le=MAX_RETRIES,
                               description="attempt the strategy sees at the first retry (1: "
                                           "the AWS 2015 simulator)")


class Occ(Model):
    """``model: occ``; ``occ`` left out takes the defaults (see :meth:`fields`)."""

    model: Literal["occ"]
    occ: OccFields | None = Field(None, description="the row's hops (model: occ)")
    about: ClassVar[str] = "an optimistic-concurrency row its clients conflict on (AWS 2015)"
    fast_path: ClassVar[bool] = False  # its own event loop, not the workers'
    queueing: ClassVar[bool] = False
    queue_workers: ClassVar[bool] = False  # workers.count clients, each one job
    done_when: ClassVar[str | None] = "completion_time"
    callers: ClassVar[str] = ("{clients} clients start together, updating one row under "
                              "optimistic concurrency")

    @staticmethod
    def fields(occ: OccFields | None) -> OccFields:
        """The ``occ`` section as a run reads it: the defaults when left out."""
        return occ if occ is not None else OccFields()

"""What every downstream model declares to the rest of herdsim (analysis, plots, the
report ask the member, never its name)."""

from __future__ import annotations

from typing import ClassVar

from herdsim.policies.family import Member


class Model(Member):
    """A downstream model (``downstream.model``): the tag, its own fields, and whether it
    serves offered load at a capacity (``queueing``: a capacity line, an offered rate,
    goodput, rejections, a dead-letter queue to speak of) and when a run of it counts as
    recovered (``done_when``: a KPI of its own, defined = recovered)."""

    queueing: ClassVar[bool] = True
    done_when: ClassVar[str | None] = None
    queue_workers: ClassVar[bool] = True  # served by queue workers (False: clients of its own)
    # its clients in a figure's heading (a model with clients of its own): ``{clients}``,
    # ``{slots}`` and ``{service}`` (the mean service time) are filled in
    callers: ClassVar[str] = ""
    successes: ClassVar[str] = "Jobs succeeding"  # what a success is, in a figure's panel
    knob: ClassVar[str | None] = None  # how a user makes fewer jobs (None: the arrivals')
    # the downstream's fields (``overload.`` ones dotted) a run of it reads, any other set
    # is refused naming the model; None: every one (not yet declared)
    reads: ClassVar[frozenset[str] | None] = None

    @classmethod
    def unread(cls, fields: set[str]) -> list[str]:
        """Those of *fields* (set in a scenario's downstream) a run of this model ignores."""
        return [] if cls.reads is None else sorted(fields - cls.reads)

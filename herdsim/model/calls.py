"""What a downstream call is: its states and the :class:`Call` record, and (from
:mod:`herdsim.policies.outcomes`, where the client rules read them) its outcomes.
"""

from __future__ import annotations

from typing import Any

from herdsim.model.kernel import Lean
from herdsim.policies.outcomes import (  # noqa: F401 (the model's names for them)
    COMPLETED,
    DELIVERED,
    DOWN,
    ERROR,
    FAILED,
    OK,
    REJECTED,
    STATUS,
    THROTTLED,
    TIMEOUT,
)

# Call states. RUNNING: in service under the continuous model, the client still waiting;
# SENT: on the request leg, not at the server yet.
WAITING, SERVING, DOOMED, ABANDONED, RUNNING, SENT = range(6)


class Call(Lean):
    """One downstream call in flight (in service or in the waiting room), made by
    :func:`make_call`."""

    # retry_after: set only on a fast failure crossing the network (see Wire) or one
    # answered from the waiting room (CoDel). A call served at once can be its own
    # completion event (``event is call``), as a kernel Timer is one. ``admitted`` and
    # ``inflight``: set only by a downstream that defends itself (when the call was
    # admitted, and how many then; ``inflight`` is 0 again once it has left the limiter).
    __slots__ = ("proc", "event", "deadline", "state", "epoch", "retry_after", "admitted",
                 "inflight")
    proc: Any  # the caller (a process, or what stands in for one: ``interrupt(cause)``)
    epoch: int
    deadline: float | None  # when its caller gives up: sent + the caller's timeout (None: never)
    state: int
    event: Any  # its completion event (a kernel event, the call itself) or None
    retry_after: float | None
    admitted: float
    inflight: int


def make_call(proc, epoch: int, deadline: float | None) -> Call:
    """A new call waiting for a slot, on behalf of *proc*. (A function, not ``__init__``:
    calling a class whose ``__init__`` is Python costs a second interpreter frame.)"""
    c = Call()
    c.proc = proc
    c.epoch = epoch
    c.deadline = deadline
    c.event = None
    c.state = WAITING
    return c

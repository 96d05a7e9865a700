"""What a downstream call is: its outcomes, its states, and the :class:`Call` record.

Outcomes are plain ints (they are compared on the hot path). ``COMPLETED`` and
``DELIVERED`` are event values only: served, with the slot still held (``COMPLETED``) or
already freed because the response spent a network delay on the way back
(``DELIVERED``).
"""

from __future__ import annotations

from typing import Any

from herdsim.model.kernel import Lean

OK, ERROR, TIMEOUT, REJECTED, DOWN, THROTTLED, FAILED, COMPLETED, DELIVERED = range(9)

# What a client sees of each failure, as ``retry.retry_on`` and ``retry.throttling`` name
# it: an answer's HTTP status (ERROR a 500; REJECTED a 503: a full waiting room, an
# admission limit answering 503, shedding, CoDel; THROTTLED a 429), no answer before the
# client's own timeout, or a connection refused or reset (DOWN, FAILED).
STATUS = {ERROR: 500, REJECTED: 503, THROTTLED: 429, TIMEOUT: "timeout", DOWN: "reset",
          FAILED: "reset"}

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
    deadline: float | None
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

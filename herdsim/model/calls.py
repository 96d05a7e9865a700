"""What a downstream call is: its outcomes, its states, and the :class:`Call` record.

Outcomes are plain ints (they are compared on the hot path). ``COMPLETED`` and
``DELIVERED`` are event values only: served, with the slot still held (``COMPLETED``) or
already freed because the response spent a network delay on the way back
(``DELIVERED``).
"""

from __future__ import annotations

OK, ERROR, TIMEOUT, REJECTED, DOWN, THROTTLED, FAILED, COMPLETED, DELIVERED = range(9)

# Call states. RUNNING: in service under the continuous model, the client still waiting;
# SENT: on the request leg, not at the server yet.
WAITING, SERVING, DOOMED, ABANDONED, RUNNING, SENT = range(6)


class Call:
    """One downstream call in flight (in service or in the waiting room)."""

    # retry_after: set only on a fast failure crossing the network (see Wire) or one
    # answered from the waiting room (CoDel). A call served at once can be its own
    # completion event (``event is call``): the run loop reads ``callbacks``, ``_ok`` and
    # ``_value``, as of a kernel Timer. ``admitted`` and ``inflight``: set only by a
    # downstream that defends itself (when the call was admitted, and how many then).
    __slots__ = ("proc", "event", "deadline", "state", "epoch", "retry_after",
                 "callbacks", "_ok", "_value", "admitted", "inflight")

    def __init__(self, proc, epoch: int, deadline: float | None):
        self.proc = proc
        self.epoch = epoch
        self.deadline = deadline
        self.event = None
        self.state = WAITING

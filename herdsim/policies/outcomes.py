"""What a call can come to: the outcomes every client rule reads, and their HTTP faces.

Outcomes are plain ints (they are compared on the hot path). ``COMPLETED`` and
``DELIVERED`` are event values only: served, with the slot still held (``COMPLETED``) or
already freed because the response spent a network delay on the way back
(``DELIVERED``). The simulation's calls (:mod:`herdsim.model.calls`) and the testbed's
HTTP answers speak the same ints.
"""

from __future__ import annotations

OK, ERROR, TIMEOUT, REJECTED, DOWN, THROTTLED, FAILED, COMPLETED, DELIVERED = range(9)

# What a client sees of each failure, as ``retry.retry_on`` and ``retry.throttling`` name
# it: an answer's HTTP status (ERROR a 500; REJECTED a 503: a full waiting room, an
# admission limit answering 503, shedding, CoDel; THROTTLED a 429), no answer before the
# client's own timeout, or a connection refused or reset (DOWN, FAILED).
STATUS = {ERROR: 500, REJECTED: 503, THROTTLED: 429, TIMEOUT: "timeout", DOWN: "reset",
          FAILED: "reset"}

HINTED = (THROTTLED, REJECTED)  # the refusals that carry the downstream's Retry-After

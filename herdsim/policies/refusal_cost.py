"""The cost of saying no (``downstream.refusal_cost``): the server time a refusal takes.

A real server pays for a call before it can refuse it: TLS, authentication, parsing,
audit (Kubernetes issue 97430: a LIST storm refused by API Priority and Fairness still cost
the API server about 5x its CPU). Per outcome, a duration of server work:

* ``rejected``: refused at the door, the waiting room full;
* ``shed``: refused by shedding or dropped by CoDel;
* ``rate_limited``: throttled by the rate limiter (429);
* ``admission``: refused by the admission limit (whatever its status);
* ``expired``: found timed out in the waiting room (its client gave up while it waited,
  ``serve_abandoned: false``): the server looks at it before dropping it.

The work takes a **slot** for that time: herdsim's slots are the server's capacity (its
CPUs, threads or workers), and in 97430 the refusals' work ran on the same CPUs as the
requests served (the filters before APF's seats), so each second refusing is a second not
serving. When every slot is busy (how a door rejection happens) the work is owed, and the
next slot to free pays it before it takes a waiting call. The caller hears the refusal at
once: the cost is the server's, not added to the client's latency. All 0 (the default):
a refusal is free, and the downstream is built without this part.
"""

from __future__ import annotations

from pydantic import Field

from herdsim.policies.fields import NonNegativeDuration, Section

MAX_COST = 3_600.0  # s: no refusal is modelled as taking more than an hour of a slot
OUTCOMES = ("rejected", "shed", "rate_limited", "admission", "expired")


class RefusalCost(Section):
    """Seconds of a slot each kind of refusal takes (0: free)."""

    rejected: NonNegativeDuration = Field(0.0, le=MAX_COST,
                                          description="refused at the door (room full)")
    shed: NonNegativeDuration = Field(0.0, le=MAX_COST,
                                      description="shed (shedding) or dropped (CoDel)")
    rate_limited: NonNegativeDuration = Field(0.0, le=MAX_COST,
                                              description="throttled by the rate limiter")
    admission: NonNegativeDuration = Field(0.0, le=MAX_COST,
                                           description="refused by the admission limit")
    expired: NonNegativeDuration = Field(0.0, le=MAX_COST,
                                         description="found expired in the waiting room")

    def costs(self) -> bool:
        """Whether any refusal costs anything (else the part is not built)."""
        return any(getattr(self, name) > 0.0 for name in OUTCOMES)

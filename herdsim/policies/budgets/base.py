"""What every retry budget's config has: the tag ``kind`` (its member's) and ``scope``,
who shares one budget. The algorithms answer one protocol, read by the workers, the call
graph's edges and the testbed:

* ``gates_calls`` — whether ``allow_call`` must be asked before every call;
* ``allow_call(now, first)`` — may a call go now (a first try when *first*)?
* ``allow_retry(now, timed_out, throttled)`` — ``(allowed, tokens taken)`` for a retry;
* ``on_result(now, ok, paid)`` — a call ended; *paid* is what its retry cost.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Member


class Budget(Member):
    """A retry budget's config: who shares it, and its kind's own fields."""

    scope: Literal["worker", "pool", "client"] = Field(
        "pool", description="who shares one budget: each worker, the pool, or each open-loop "
                            "client")
    fast_path: ClassVar[bool] = False  # it gates the workers' retries (or calls)

    def fluid_gate(self, dt: float) -> object | None:
        """Its fluid form as a gate on a fluid's retry flow
        (:mod:`herdsim.policies.budgets.fluid`), one budget for the pool; None: the fluid
        model does not have it (yet)."""
        return None
    emulated: ClassVar[bool] = True  # the testbed's workers run it (testbed/shared.py)
    gates_every_call: ClassVar[bool] = False  # counts every call sent (the breaker must
    # not stop one after it is counted)

"""What every balancer has: who holds its view (``scope``), whether a retry avoids the
hosts its caller already tried (``previous_hosts``), the panic threshold, and the
:class:`Picker` protocol its rule answers. Pure Python, no SimPy.

Read from Envoy (``source/extensions/load_balancing_policies/common/load_balancer_impl.cc``
at envoyproxy/envoy commit 00cf9a05, the v1.36 line): with one priority level a host set
is in panic when its healthy hosts are fewer than ``healthy_panic_threshold`` percent of
its hosts (default 50), and then the balancer picks among all hosts, healthy or not.
A retry's host is picked again at most once when its predicate (``previous_hosts``)
rejects it (``host_selection_retry_max_attempts``, default 1); the second pick stands.
``max_pending_requests`` (``source/common/upstream/resource_manager_impl.h``, the
HTTP/1 connection pool's ``newStream``): a request with no ready connection waits in the
cluster's pending queue, or fails at once (``upstream_rq_pending_overflow``) when that
queue holds the limit; here a replica's slots stand for its connections, so the pending
calls are those in the replicas' waiting rooms.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal, Protocol

from pydantic import Field, model_validator

from herdsim.policies.family import Member
from herdsim.policies.fields import MAX_WORKERS, FieldError

MAX_REPLICAS = 1000  # replicas of one tier: every one is a pool with its own timers


class Picker(Protocol):
    """One view of a balancer: ``pick(hosts, active, key)`` returns one of *hosts* (the
    eligible host indices, ascending), knowing *active* (calls in flight per host index,
    as this view sees them) and *key* (the call's hash key: its request's key, else its
    caller's number: :meth:`herdsim.model.downstream.fleet.Fleet.key_of`)."""

    def pick(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int: ...

    def again(self, hosts: Sequence[int], active: Sequence[int], key: int) -> int:
        """The pick made again for a retry that landed on a host already tried."""
        ...


class Balancer(Member):
    """A balancer's shared fields; the rule is the member's :meth:`picker`."""

    scope: Literal["proxy", "client"] = Field(
        "proxy", description="proxy: one view shared by every caller; client: one per "
                             "caller (its own round-robin position and in-flight counts)")
    previous_hosts: bool = Field(
        False, description="a retry picks again (once) when it lands on a host its caller "
                           "tried since its last success (Envoy's previous_hosts predicate)")
    panic_threshold: float = Field(
        50.0, ge=0, le=100, description="percent of healthy hosts below which the "
                                        "balancer picks among all hosts (Envoy's "
                                        "healthy_panic_threshold)")
    max_pending_requests: int | None = Field(
        None, ge=0, le=MAX_WORKERS,
        description="Envoy's max_pending_requests circuit breaker: calls waiting for a "
                    "slot at the replicas (the sum of their waiting rooms) at most; a call "
                    "whose replica has no free slot beyond it fails at once (503, "
                    "pending_overflow). null: no limit (Envoy's default is 1024)")
    fluid: ClassVar[str | None] = None
    keyed: ClassVar[bool] = False  # picks by the call's key (a hash balancer)

    @model_validator(mode="after")
    def _a_proxys_limit(self) -> Balancer:
        if self.max_pending_requests is not None and self.scope == "client":
            raise FieldError("max_pending_requests", "max_pending_requests is a proxy's "
                                                     "circuit breaker: it needs scope: proxy")
        return self

    @abstractmethod
    def picker(self, n: int, draw: Callable[[], float]) -> Picker:
        """A view of *n* hosts, drawing uniform numbers from *draw*."""

    def table_entries(self) -> int:
        """Entries of one table it builds (a hash balancer's ring or Maglev table)."""
        return 0


def index(draw: Callable[[], float], n: int) -> int:
    """A uniform index below *n* (``random() % n`` in Envoy)."""
    return min(int(draw() * n), n - 1)


def in_panic(healthy: int, n: int, threshold: float) -> bool:
    """Envoy's ``isHostSetInPanic`` for one priority level (no degraded hosts)."""
    return n == 0 or 100.0 * healthy / n < threshold

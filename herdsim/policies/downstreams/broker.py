"""``model: broker``: clients that hold a connection to a broker (MQTT, websockets, NATS,
gRPC streams) and reconnect, each with its own backoff, when it drops
(herdsim/model/downstream/broker.py), with its own fields under ``downstream.broker``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.downstreams.base import Model
from herdsim.policies.fields import MAX_WORKERS, NonNegativeDuration, Section

MAX_CONNECTIONS = 10 * MAX_WORKERS  # a limit above the clients (workers.count) never binds
BYTES_PER_CLIENT = 40  # a client in the engine: five flat arrays (29 B), and slack


class BrokerFields(Section):
    """``downstream.broker``: the broker's connection limit and how fast a client notices
    a silent broker."""

    max_connections: int | None = Field(
        None, ge=1, le=MAX_CONNECTIONS,
        description="connections open at once (established or in handshake); a connect "
                    "beyond it is refused and its client backs off; null = no limit")
    keepalive: NonNegativeDuration = Field(
        0.0, description="how long a connected client takes to notice a silent broker (a "
                         "blackhole outage) and drop its connection")


class Broker(Model):
    """``model: broker``; ``broker`` left out takes the defaults (see :meth:`fields`).

    ``workers.count`` clients start connected. A ``down`` outage (and a crash of
    ``overload.collapse``) drops every connection at its start; a ``blackhole`` drops
    them ``keepalive`` later. A dropped client sleeps its ``retry`` strategy's backoff
    before each connect; a connect takes one of ``downstream.concurrency`` handshake slots
    for a ``downstream.service`` time (``queue_limit``: the accept backlog; ``timeout``:
    the client's connect timeout)."""

    model: Literal["broker"]
    broker: BrokerFields | None = Field(None, description="the broker's connection limit "
                                                          "(model: broker)")
    about: ClassVar[str] = ("clients holding connections to a broker, reconnecting with "
                            "their own backoff when they drop")
    fast_path: ClassVar[bool] = False  # its own event loop, not the workers'
    queueing: ClassVar[bool] = False
    queue_workers: ClassVar[bool] = False  # workers.count clients, each one connection
    done_when: ClassVar[str | None] = "reconnect_time"
    successes: ClassVar[str] = "Clients reconnecting (jobs: disconnections ending)"
    knob: ClassVar[str | None] = "lower workers.count (the clients)"
    callers: ClassVar[str] = ("{clients} clients connected to a broker, a connect {service} "
                              "of one of {slots} handshake slots")
    fluid: ClassVar[str | None] = ("connects at the strategy's sleep density, served at "
                                   "concurrency / mean connect time")

    reads: ClassVar[frozenset[str] | None] = frozenset({
        "model", "concurrency", "queue_limit", "service", "timeout", "serve_abandoned",
        "outages", "overload", "overload.collapse", "broker"})

    @staticmethod
    def fields(broker: BrokerFields | None) -> BrokerFields:
        """The ``broker`` section as a run reads it: the defaults when left out."""
        return broker if broker is not None else BrokerFields()

"""The network between the callers and the downstream: the legs a call crosses.

``downstream.network_delay`` is the response leg: a served call's response reaches its
client one draw after the server is done (the service parts add it), and so does a fast
failure (:meth:`Wire.call` here). Without a network delay the downstream's admission is
the call itself and nothing here runs.
"""

from __future__ import annotations

from herdsim.model.calls import Call


class Wire:
    """``call`` for a downstream whose answers cross a network delay."""

    def __init__(self, downstream, response):
        self.env = downstream.env
        self._ds = downstream
        self._admit = downstream.admit
        self._response = response

    def call(self, proc):
        """Admit the call; a fast failure reaches its client one response leg later."""
        outcome = self._admit(proc)
        if outcome.__class__ is not int:
            return outcome
        c = Call(proc, self._ds.epoch, None)
        c.event = self.env.timeout(self._response(), outcome)
        return c

"""The network between the callers and the downstream: the legs a call crosses.

``downstream.network_delay`` is the response leg: a served call's response reaches its
client one draw after the server is done (the service parts add it), and so does a fast
failure (:meth:`Wire.respond_late` here), carrying the Retry-After it was sent with.
``downstream.request_delay`` is the request leg (:meth:`Wire.send`): the call reaches
the server one draw after it was sent, and is admitted then; its client deadline counts
from the send. Without either delay the downstream's admission is the call itself and
nothing here runs.
"""

from __future__ import annotations

from herdsim.model.calls import ABANDONED, SENT, SERVING, TIMEOUT, Call, make_call
from herdsim.model.kernel import later, trigger_later, unfired


class Wire:
    """``call`` for a downstream whose calls or answers cross a network delay."""

    def __init__(self, downstream, response, request=None):
        self.env = downstream.env
        self._ds = downstream
        self._admit = downstream.admit
        self._response = response
        self._request = request
        self.call = self.send if request is not None else self.respond_late
        self._on_arrival = self._arrive  # bound once, not once per call
        downstream.on_deadline = self._expire  # a sent call's deadline is the wire's

    def respond_late(self, proc, timeout: float | None):
        """Admit the call; a fast failure reaches its client one response leg later."""
        outcome = self._admit(proc, timeout)
        if outcome.__class__ is not int:
            return outcome
        c = make_call(proc, self._ds.epoch, None)
        c.state = SERVING  # the answer is on its way: nothing can end it sooner
        c.retry_after = self._ds.retry_after
        c.event = later(self.env, self._response(), outcome)
        return c

    def send(self, proc, timeout: float | None):
        """Send a call: it reaches the server one request leg later (:meth:`_arrive`); its
        client's *timeout* counts from now."""
        env = self.env
        c = make_call(proc, -1, env.now + timeout if timeout is not None else None)
        c.state = SENT
        c.event = unfired()
        timer = later(env, self._request())
        timer.callbacks.append(self._on_arrival)
        timer.call = c
        if timeout is not None:
            self._ds.arm_deadline(c)
        return c

    def _arrive(self, timer) -> None:
        """The call reaches the server; a fast failure crosses the response leg back."""
        c = timer.call
        outcome = self._ds.arrive(c)
        if outcome is None or c.state == ABANDONED:
            return
        now = self.env.now
        delay = self._response() if self._response is not None else 0.0
        c.state = SERVING  # the answer is on its way: the deadline timer leaves it alone
        c.retry_after = self._ds.retry_after
        if c.deadline is not None and now + delay > c.deadline:
            outcome, delay = TIMEOUT, c.deadline - now
        trigger_later(self.env, c.event, outcome, delay)

    def _expire(self, c: Call) -> None:
        """A client deadline: a call on the request leg still is abandoned."""
        if c.state == SENT:
            c.state = ABANDONED
            trigger_later(self.env, c.event, TIMEOUT)
        else:
            self._ds.expire(c)

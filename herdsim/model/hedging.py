"""Hedged calls (gRPC's A6 hedging policy): copies of one call, the first success wins.

The first copy goes at once and one more every ``delay`` until ``max_attempts`` copies
are out or an answer ends it: a success (the others are cancelled), a fatal failure
(every other copy is cancelled and the failure is the answer), or, once every copy sent
has failed with a non-fatal outcome and no more may go, the last failure. A non-fatal
failure sends the next copy at once and restarts the delay. Throttling is gRPC's retry
throttle: the budgets' token bucket
(:class:`herdsim.policies.budgets.token_bucket.TokenBucketBudget` with the ``grpc``
preset's rules, ``max_tokens`` and ``token_ratio``): a success returns ``token_ratio``,
a non-fatal failure costs 1, and no copy but the first goes while the
tokens are at or below ``max_tokens``/2. (grpc/proposal A6-client-retries.md, "Hedging
Policy" and "Throttling Retry Attempts and Hedged RPCs", @0070717.)

A cancelled copy is a copy whose client gave up: the callee drops it from its waiting
room (``cancel``), or lets it finish; its answer is counted by the callee and ignored
here. Copies are plain callbacks on kernel timers, no process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herdsim.model.calls import DOWN, ERROR, FAILED, OK, REJECTED, THROTTLED, TIMEOUT
from herdsim.model.kernel import later, trigger_later, unfired, urgent
from herdsim.policies.budgets.token_bucket import PRESETS, TokenBucketBudget

OUTCOMES = {"error": ERROR, "timeout": TIMEOUT, "rejected": REJECTED, "down": DOWN,
            "throttled": THROTTLED, "failed": FAILED}  # the names non_fatal lists


def throttle(max_tokens: float, token_ratio: float) -> TokenBucketBudget:
    """gRPC's retry throttle as the budgets' token bucket (its ``grpc`` preset)."""
    params: dict[str, Any] = {**PRESETS["grpc"], "capacity": max_tokens,
                              "success_refund": token_ratio}
    return TokenBucketBudget(**params)


class Policy:
    """A ``hedging`` section at run time: its numbers and its throttle (one per caller:
    an edge, or the workers)."""

    def __init__(self, cfg):
        self.delay = cfg.delay
        self.max_attempts = cfg.max_attempts
        self.non_fatal = frozenset(OUTCOMES[name] for name in cfg.non_fatal)
        self.throttle = (throttle(cfg.throttle.max_tokens, cfg.throttle.token_ratio)
                         if cfg.throttle is not None else None)


class Copy:
    """One copy in flight: the process the callee's protocol expects."""

    __slots__ = ("hedge", "call")

    def __init__(self, hedge: Hedge):
        self.hedge = hedge
        self.call = None

    @property
    def cancels(self) -> bool:
        return self.hedge.cancels

    def heard(self, event) -> None:
        c = self.call
        if c is None or c.event is not event:
            return  # failed at t0 already
        self.call = None
        self.hedge.answered(self, self.hedge.finish(c, event.value))

    def interrupt(self, cause) -> None:
        """The callee failed its calls in flight (t0)."""
        self.call = None
        urgent(self.hedge.env, cause).callbacks.append(self._interrupted)

    def _interrupted(self, timer) -> None:
        self.hedge.answered(self, timer.value)


class Hedge:
    """One hedged call to *callee*. ``prepare()`` gives each copy's timeout (``False``:
    no time left, send no more); ``count(outcome)`` sees every copy's outcome;
    ``done(outcome, copies)`` gets the answer once."""

    __slots__ = ("policy", "env", "callee", "finish", "prepare", "count", "done", "cancels",
                 "copies", "sent", "pending", "over", "token")

    def __init__(self, policy: Policy, callee, prepare: Callable[[], Any],
                 count: Callable[[int], None], done: Callable[[int, int], None],
                 cancels: bool = False):
        self.policy = policy
        self.env = callee.env
        self.callee = callee
        self.finish = callee.finish
        self.prepare = prepare
        self.count = count
        self.done = done
        self.cancels = cancels
        self.copies: list[Copy] = []
        self.sent = 0
        self.pending = 0
        self.over = False
        self.token = 0  # the hedging timer's generation: a stale timer does nothing

    def start(self) -> None:
        """Send the first copy and arm the delay."""
        self._send()

    def _send(self) -> None:
        """One more copy now (the first always; the others as the throttle lets), and
        the timer for the one after."""
        policy = self.policy
        if self.sent and policy.throttle is not None \
                and not policy.throttle.allow_retry(self.env.now, False)[0]:
            self.sent = policy.max_attempts  # throttled: no more copies
            self._settle_if_idle(None)
            return
        timeout = self.prepare()
        if timeout is False:  # the caller's deadline has passed
            self.sent = policy.max_attempts
            self._settle_if_idle(TIMEOUT)
            return
        self.sent += 1
        copy = Copy(self)
        c = self.callee.call(copy, timeout)
        if self.sent < policy.max_attempts:
            self.token += 1
            timer = later(self.env, policy.delay, self.token)
            timer.callbacks.append(self._due)
        self.pending += 1
        if c.__class__ is int:
            self.answered(copy, c)
            return
        copy.call = c
        self.copies.append(copy)
        c.event.callbacks.append(copy.heard)

    def _due(self, timer) -> None:
        if timer.value == self.token and not self.over and self.sent < self.policy.max_attempts:
            self._send()

    def answered(self, copy: Copy, outcome: int) -> None:
        """A copy's outcome."""
        self.pending -= 1
        self.count(outcome)
        if copy in self.copies:
            self.copies.remove(copy)
        if self.over:
            return  # a cancelled copy's answer
        throttle_ = self.policy.throttle
        if outcome == OK:
            if throttle_ is not None:
                throttle_.on_result(self.env.now, True, 0.0)
            self._end(OK)
            return
        if outcome not in self.policy.non_fatal:
            self._end(outcome)
            return
        if throttle_ is not None:
            throttle_.on_result(self.env.now, False, 0.0)
        if self.sent < self.policy.max_attempts:
            self._send()  # at once, and the delay starts again
        else:
            self._settle_if_idle(outcome)

    def _settle_if_idle(self, outcome: int | None) -> None:
        """No more copies will go: with none in flight, the last failure is the answer."""
        if not self.pending and not self.over:
            self._end(outcome if outcome is not None else ERROR)

    def cancel(self) -> None:
        """The caller gave up: no more copies, the ones in flight cancelled."""
        self.over = True
        copies, self.copies = self.copies, []
        cancel = getattr(self.callee, "cancel", None)
        for copy in copies:
            if copy.call is not None and cancel is not None:
                cancel(copy.call)

    def _end(self, outcome: int) -> None:
        self.cancel()
        self.done(outcome, self.sent)


def for_workers(sim) -> Callable[[Any], Any]:
    """``hedged(job)``: the workers' call hedged by the scenario's top-level ``hedging``,
    as an event that fires with its outcome (the job's ``attempts`` count every copy)."""
    env, callee, policy = sim.env, sim.downstream, Policy(sim.scenario.hedging)
    timeout = sim.scenario.downstream.timeout

    def hedged(job):
        event = unfired()

        def done(outcome: int, copies: int) -> None:
            job.attempts += copies - 1
            trigger_later(env, event, outcome)

        Hedge(policy, callee, lambda: timeout, _ignore, done).start()
        return event

    return hedged


def _ignore(_outcome: int) -> None:
    """The workers' copies are counted by the tier."""

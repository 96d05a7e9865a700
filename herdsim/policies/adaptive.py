"""botocore's adaptive retry mode: the client rate limiter, ported with the clock passed in.

botocore 1.44.8, ``botocore/retries/adaptive.py``, ``throttling.py`` and ``bucket.py``
(the same text as boto/botocore @0e6e2404; docs/policies.md cites the lines). The
arithmetic is botocore's, in botocore's order, so the objects driven with the same clock
give the same floats (``tests/policies/test_adaptive.py`` drives both):

- :class:`CubicCalculator`: on a throttle ``w_max = rate``, ``K = (w_max (1 - β) / C)^⅓``
  and the rate becomes ``β × rate``; on any other response ``C (t - t_fail - K)³ + w_max``
  (C = 0.4, β = 0.7).
- :class:`RateClocker`: responses counted in 0.5 s buckets, the rate smoothed by an EMA
  of weight 0.8 on the newest bucket.
- :class:`TokenBucket`: fill rate ``max(rate, 0.5)`` per second, capacity ``max(rate,
  1)``; acquiring one token waits until the bucket holds one.
- :class:`ClientRateLimiter`: the bucket is used only after the first throttling error;
  after each response its rate is ``min(cubic, 2 × measured rate)``.

botocore blocks the calling thread inside ``acquire``; here ``acquire(now)`` returns the
wait before asking again (botocore's ``_sleep_amount``), and the caller sleeps it.

The client limiter family has one member, :class:`AwsAdaptive` (``kind: aws_adaptive``,
the default): its config, and ``build`` for the limiter.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field

from herdsim.policies.family import Family, Member

SCALE_CONSTANT = 0.4  # throttling.py CubicCalculator._SCALE_CONSTANT
BETA = 0.7  # throttling.py CubicCalculator._BETA
SMOOTHING = 0.8  # adaptive.py RateClocker._DEFAULT_SMOOTHING
TIME_BUCKET_RANGE = 0.5  # adaptive.py RateClocker._TIME_BUCKET_RANGE
MIN_RATE = 0.5  # bucket.py TokenBucket._MIN_RATE
MAX_RATE_ADJUST_SCALE = 2.0  # adaptive.py ClientRateLimiter._MAX_RATE_ADJUST_SCALE


class CubicCalculator:
    """The CUBIC rate: ``success_received(t)`` and ``error_received(rate, t)``."""

    def __init__(self, starting_max_rate: float, start_time: float,
                 scale_constant: float = SCALE_CONSTANT, beta: float = BETA):
        self.w_max = starting_max_rate
        self.scale_constant = scale_constant
        self.beta = beta
        self.k = self._zero_point()
        self.last_fail = start_time

    def _zero_point(self) -> float:
        scaled_value = (self.w_max * (1 - self.beta)) / self.scale_constant
        return scaled_value ** (1 / 3.0)

    def success_received(self, timestamp: float) -> float:
        dt = timestamp - self.last_fail
        return self.scale_constant * (dt - self.k) ** 3 + self.w_max

    def error_received(self, current_rate: float, timestamp: float) -> float:
        self.w_max = current_rate
        self.k = self._zero_point()
        self.last_fail = timestamp
        return current_rate * self.beta


class RateClocker:
    """The measured response rate: counts per 0.5 s bucket, smoothed."""

    def __init__(self, now: float, smoothing: float = SMOOTHING):
        self.measured_rate = 0.0
        self.smoothing = smoothing
        self._last_bucket: float = math.floor(now)
        self._time_bucket_scale = 1 / TIME_BUCKET_RANGE
        self._count = 0

    def record(self, now: float, amount: int = 1) -> float:
        bucket = math.floor(now * self._time_bucket_scale) / self._time_bucket_scale
        self._count += amount
        if bucket > self._last_bucket:
            current_rate = self._count / float(bucket - self._last_bucket)
            self.measured_rate = (current_rate * self.smoothing) + (
                self.measured_rate * (1 - self.smoothing))
            self._count = 0
            self._last_bucket = bucket
        return self.measured_rate


class TokenBucket:
    """Tokens filling at ``max_rate`` (at least 0.5/s) up to ``max(max_rate, 1)``."""

    def __init__(self, max_rate: float, now: float, min_rate: float = MIN_RATE):
        self.fill_rate: float = 0.0
        self.max_capacity: float = 1.0
        self.capacity: float = 0
        self._last_timestamp: float | None = None
        self._min_rate = min_rate
        self.set_max_rate(max_rate, now)

    @property
    def max_rate(self) -> float:
        return self.fill_rate

    def set_max_rate(self, value: float, now: float) -> None:
        """botocore's ``max_rate`` setter: refill at the old rate first."""
        self._refill(now)
        self.fill_rate = max(value, self._min_rate)
        self.max_capacity = value if value >= 1 else 1
        self.capacity = min(self.capacity, self.max_capacity)

    def acquire(self, now: float, amount: float = 1) -> float:
        """Take *amount* tokens (0.0) or say how long to wait before asking again."""
        self._refill(now)
        if amount <= self.capacity:
            self.capacity -= amount
            return 0.0
        return (amount - self.capacity) / self.fill_rate

    def _refill(self, now: float) -> None:
        if self._last_timestamp is None:
            self._last_timestamp = now
            return
        fill_amount = (now - self._last_timestamp) * self.fill_rate
        self.capacity = min(self.max_capacity, self.capacity + fill_amount)
        self._last_timestamp = now


class ClientRateLimiter:
    """One botocore client's limiter (``register_retry_handler``): ``before_send(now)``
    before every attempt, ``after_response(now, throttled)`` after every response."""

    def __init__(self, now: float):
        self.cubic = CubicCalculator(starting_max_rate=0, start_time=now)
        self.bucket = TokenBucket(max_rate=1, now=now)
        self.clocker = RateClocker(now)
        self.enabled = False

    def before_send(self, now: float) -> float:
        """``on_sending_request``: 0.0 when the call may leave, else the wait."""
        return self.bucket.acquire(now) if self.enabled else 0.0

    def after_response(self, now: float, throttled: bool) -> None:
        """``on_receiving_response``."""
        measured_rate = self.clocker.record(now)
        if not throttled:
            new_rate = self.cubic.success_received(now)
        else:
            rate_to_use = (measured_rate if not self.enabled
                           else min(measured_rate, self.bucket.max_rate))
            new_rate = self.cubic.error_received(rate_to_use, now)
            self.enabled = True
        self.bucket.set_max_rate(min(new_rate, MAX_RATE_ADJUST_SCALE * measured_rate), now)


class AwsAdaptive(Member):
    """``kind: aws_adaptive`` (the default): botocore's adaptive retry mode, a client-side
    rate limiter before every attempt."""

    kind: Literal["aws_adaptive"] = "aws_adaptive"
    scope: Literal["worker", "pool", "client"] = Field(
        "pool", description="pool: one client shared by every worker (a boto3 client "
                            "shared by threads); worker: one each; client: per open-loop "
                            "client")
    about: ClassVar[str] = "a CUBIC send rate after the first throttle (botocore adaptive " \
                           "mode)"
    fast_path: ClassVar[bool] = False  # every attempt waits for its token
    fluid: ClassVar[str | None] = "send rate ×0.7 on a throttle, regrown as a cubic, at " \
                                  "most twice the measured rate"

    def build(self, now: float) -> ClientRateLimiter:
        """The limiter, its clock started at *now*."""
        return ClientRateLimiter(now)


FAMILY = Family("client limiter", "client limiter", "kind", (AwsAdaptive,),
                default="aws_adaptive")
ClientLimiter = FAMILY.union()

"""The libraries' own schedules (used by the presets, herdsim/policies/presets.py). Each
docstring names the source line it follows; docs/policies.md cites the commit read."""

from __future__ import annotations

import math

import numpy as np

from herdsim.policies.backoff.base import (
    Ladder,
    Strategy,
    _atoms_at_most,
    _uniform_cdf,
    _whole_at_most,
    jitter_fraction,
)


class Immediate(Strategy):
    """No wait at all (tenacity's ``wait_none``, Finagle's requeues, spring-kafka's
    ``FixedBackOff(0, 9)``). ``base`` and ``cap`` are not used. Such a policy needs
    ``workers.attempt_overhead`` so that retrying cannot freeze simulated time."""

    name = "immediate"
    fluid = "a delta at 0"
    min_sleep = 0.0
    formula = "0"

    def sleep(self, attempt, prev, rng):
        return 0.0

    def cdf(self, x, attempt, prev):
        return (np.asarray(x) >= 0.0) * np.ones_like(np.asarray(attempt, dtype=float))


class Sidekiq(Strategy):
    """Sidekiq's default delay (``lib/sidekiq/job_retry.rb``): ``count**4 + 15`` seconds
    plus ``rand(10 * (count + 1))``, a whole number in ``[0, 10 (count + 1))``; ``count`` is
    the retry count from 0 (= ``attempt``). ``base`` is the constant 15; ``cap`` bounds the
    total (Sidekiq has none)."""

    name = "sidekiq"
    fluid = "n^4 + 15 s + a whole number uniform on [0, 10(n + 1)), capped"
    formula = "min(cap, a^4 + base + randint[0, 10(a+1))),  base = 15 s"

    def sleep(self, attempt, prev, rng):
        jitter = int(rng.integers(0, 10 * (attempt + 1)))
        return min(self.cap, float(attempt**4) + self.base + jitter)

    def cdf(self, x, attempt, prev):
        x, a = np.asarray(x, dtype=float), np.asarray(attempt, dtype=float)
        low = a**4 + self.base
        below = _atoms_at_most(x, 10.0 * (a + 1), lambda k: low + k, np.floor(x - low))
        return np.where(x >= self.cap, 1.0, below)


class Celery(Strategy):
    """Celery's ``get_exponential_backoff_interval`` (``celery/utils/time.py``) as
    ``autoretry_for`` calls it: ``randrange(min(maximum, factor * 2**retries) + 1)`` whole
    seconds, ``factor = int(max(1, retry_backoff))`` (``base``), ``maximum =
    retry_backoff_max`` (``cap``, 600 s); ``jitter: false`` is ``retry_jitter=False``."""

    name = "celery"
    fluid = "a whole number of seconds uniform on [0, min(cap, base·2^n)]"
    min_sleep = 0.0
    formula = "randint[0, min(cap, base * 2^a)] whole seconds"

    def __init__(self, base: float, cap: float, jitter: bool = True):
        super().__init__(base, cap)
        self.factor = int(max(1.0, self.base))
        self.maximum = int(self.cap)
        self.jitter = bool(jitter)

    def sleep(self, attempt, prev, rng):
        countdown = min(self.maximum, self.factor * 2**attempt)
        if self.jitter:
            countdown = int(rng.integers(0, countdown + 1))
        return float(max(0, countdown))

    def cdf(self, x, attempt, prev):
        x = np.asarray(x, dtype=float)
        exponent = np.minimum(np.asarray(attempt, dtype=float), 64.0)  # 2^64 s: past any cap
        countdown = np.maximum(np.minimum(self.maximum, self.factor * np.exp2(exponent)), 0)
        if not self.jitter:
            return (x >= countdown).astype(float)
        return _atoms_at_most(x, countdown + 1, lambda k: k, np.floor(x))


class Envoy(Strategy):
    """Envoy's ``JitteredExponentialBackOffStrategy::nextBackOffMs``: ``random() %
    interval`` whole milliseconds; the interval starts at ``base`` and doubles while it is
    below ``cap / 2`` (``doubling_limit_``), then stays at ``cap``."""

    name = "envoy"
    fluid = "whole ms uniform on [0, i_n), i_n = base·2^n until cap/2, then cap"
    min_sleep = 0.0
    formula = "randint[0, i_a) ms,  i_0 = base, i_(a+1) = 2 i_a if i_a < cap/2 else cap"

    def __init__(self, base: float, cap: float):
        super().__init__(base, cap)
        self.base_ms = max(1, round(self.base * 1000))
        self.max_ms = max(self.base_ms, round(self.cap * 1000))
        self.intervals = Ladder(self.base_ms, self._next_interval)

    def _next_interval(self, interval: int) -> int:
        return self.max_ms if interval >= self.max_ms // 2 else interval * 2

    def sleep(self, attempt, prev, rng):
        return int(rng.integers(0, self.intervals.at(attempt))) / 1000.0

    def cdf(self, x, attempt, prev):
        x = np.asarray(x, dtype=float)
        return _atoms_at_most(x, self.intervals.many(attempt), lambda k: k / 1000.0,
                              np.floor(x * 1000.0))


class GrpcConnect(Strategy):
    """gRPC's connection backoff (grpc-go ``internal/backoff/backoff.go``): the first
    retry waits exactly ``base``; retry ``a`` waits ``min(base * multiplier^a, cap)``
    scaled by ``1 + jitter * U(-1, 1)``."""

    name = "grpc_connect"
    fluid = "n = 0: a delta at base; else uniform on min(cap, base·m^n)·[1 - j, 1 + j]"
    formula = "a = 0: base;  else min(cap, base * m^a) * U(1 - j, 1 + j),  m = 1.6, j = 0.2"

    def __init__(self, base: float, cap: float, multiplier: float = 1.6, jitter: float = 0.2):
        super().__init__(base, cap)
        if multiplier < 1.0 or not 0.0 <= jitter < 1.0:
            raise ValueError("multiplier must be >= 1 and jitter in [0, 1)")
        self.multiplier = float(multiplier)
        self.jitter = float(jitter)
        self.backoffs = Ladder(self.base, self._next_backoff)

    def _next_backoff(self, backoff: float) -> float:
        """grpc-go multiplies while below the cap (then caps, in ``sleep``)."""
        return backoff * self.multiplier if backoff < self.cap else backoff

    def sleep(self, attempt, prev, rng):
        if attempt == 0:
            return self.base
        backoff = min(self.backoffs.at(attempt), self.cap)
        return max(0.0, backoff * (1.0 + self.jitter * (rng.random() * 2.0 - 1.0)))

    def cdf(self, x, attempt, prev):
        x, a = np.asarray(x, dtype=float), np.asarray(attempt)
        backoff = np.minimum(self.backoffs.many(a), self.cap)
        spread = _uniform_cdf(x, backoff * (1.0 - self.jitter), backoff * (1.0 + self.jitter))
        return np.where(a == 0, (x >= self.base).astype(float), spread)


class Cenkalti(Strategy):
    """cenkalti/backoff v4 ``ExponentialBackOff.NextBackOff``: interval ``I_0 = base``,
    ``I_(a+1) = cap`` once ``I_a >= cap / multiplier``, else ``I_a * multiplier``; the sleep
    is ``I_a - d + U * (2 d + 1 ns)``, ``d = randomization * I_a``."""

    name = "cenkalti"
    fluid = "uniform on I_n·[1 - r, 1 + r], I_n = min(cap, base·m^n)"
    formula = "I_a * U(1 - r, 1 + r),  I_0 = base, I_(a+1) = min(cap, 1.5 I_a), r = 0.5"

    def __init__(self, base: float, cap: float, multiplier: float = 1.5,
                 randomization: float = 0.5):
        super().__init__(base, cap)
        if multiplier <= 1.0 or not 0.0 <= randomization < 1.0:
            raise ValueError("multiplier must be > 1 and randomization in [0, 1)")
        self.multiplier = float(multiplier)
        self.randomization = float(randomization)
        self.intervals = Ladder(self.base, self._next_interval)

    def _next_interval(self, interval: float) -> float:
        return self.cap if interval >= self.cap / self.multiplier else interval * self.multiplier

    def sleep(self, attempt, prev, rng):
        current = self.intervals.at(attempt)
        delta = self.randomization * current
        return current - delta + rng.random() * (2.0 * delta + 1e-9)

    def cdf(self, x, attempt, prev):
        current = self.intervals.many(attempt)
        low = current - self.randomization * current
        return _uniform_cdf(np.asarray(x, dtype=float), low,
                            low + (2.0 * self.randomization * current + 1e-9))


class Kafka(Strategy):
    """Kafka's ``ExponentialBackoff.backoff(attempts)`` (``common/utils/ExponentialBackoff
    .java``) with ``attempts = a``: ``term = base * 2^min(a, expMax)``, ``expMax =
    log2(cap / base)``; the sleep is ``min(cap, floor(term * U(1 - j, 1 + j)))`` ms."""

    name = "kafka"
    fluid = "whole ms of base·2^min(n, log2(cap/base))·U(1 - j, 1 + j), at most cap"
    formula = "min(cap, base * 2^min(a, log2(cap/base)) * U(0.8, 1.2)), whole ms"

    def __init__(self, base: float, cap: float, jitter: float = 0.2):
        super().__init__(base, cap)
        self.jitter = jitter_fraction(jitter)
        self.base_ms = self.base * 1000.0
        self.max_ms = self.cap * 1000.0
        self.exp_max = (math.log(self.max_ms / max(self.base_ms, 1.0)) / math.log(2)
                        if self.max_ms > self.base_ms else 0.0)

    def sleep(self, attempt, prev, rng):
        if self.exp_max == 0.0:
            return self.base
        term = self.base_ms * 2.0 ** min(attempt, self.exp_max)
        factor = 1.0 - self.jitter + 2.0 * self.jitter * rng.random()
        return min(math.floor(factor * term), self.max_ms) / 1000.0

    def cdf(self, x, attempt, prev):
        x, a = np.asarray(x, dtype=float), np.asarray(attempt, dtype=float)
        if self.exp_max == 0.0:
            return (x >= self.base) * np.ones_like(a)
        term = self.base_ms * np.power(2.0, np.minimum(a, self.exp_max))
        if self.jitter == 0.0:  # whole ms of term itself
            return (x >= np.minimum(np.floor(term), self.max_ms) / 1000.0).astype(float)
        # floor(Y) <= k exactly when Y < k + 1, Y uniform on term * [1 - j, 1 + j)
        k = _whole_at_most(x, lambda k: k / 1000.0, np.floor(x * 1000.0))
        below = _uniform_cdf(k + 1.0, term * (1.0 - self.jitter), term * (1.0 + self.jitter))
        return np.where(x >= self.max_ms / 1000.0, 1.0, below)

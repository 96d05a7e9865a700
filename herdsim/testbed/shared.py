"""Breakers and budgets for the testbed's workers: their own (``scope: worker``) or one
shared through Redis by every worker process (``scope: pool``), as the simulation shares
one object across the pool.

Every worker talks to its guard through the same awaitable face (:class:`LocalBreaker`,
:class:`SharedBreaker`, :class:`LocalBudget`, :class:`SharedBudget`). The local ones wrap
the policies' own objects (:mod:`herdsim.policies.breaker`, :mod:`herdsim.policies.budgets`).
The shared ones keep the same state in one Redis key and change it with a Lua script, so
each decision is atomic across processes; the scripts transcribe those objects' methods
line by line (same arithmetic on the same doubles: the state travels as MessagePack,
numbers as ``repr`` strings and ``%.17g``), and their parameters are read off a pure
object built from the same section, so both make the same decisions for the same events
(tests/testbed/test_shared.py feeds both one sequence and compares every answer).

One difference, by necessity: the workers of several processes stamp events with their
own clocks, and a call that started earlier may report later, so the shared state never
lets time go backwards (an event stamped before the last one it saw counts at the last
one's time: a few milliseconds at most). The pure objects are only fed ordered times.

Real fleets usually keep one breaker and one budget per process (what ``scope: worker``
models per worker); a pool-wide one costs a Redis round trip per call, as here.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable

from herdsim.policies.breaker import CLOSED, OPEN, CircuitBreaker
from herdsim.policies.budgets.adaptive import AdaptiveThrottle
from herdsim.policies.budgets.cumulative_ratio import CumulativeRatio
from herdsim.policies.budgets.ratio import RatioBudget
from herdsim.policies.budgets.token_bucket import TokenBucketBudget
from herdsim.policies.windows import TIME_BUCKETS, CountWindow, TimeWindow

BREAKER_KEY, BUDGET_KEY = "herdsim:breaker", "herdsim:budget"
REFRESH = 0.005  # s: how stale a shared breaker's cached state may be for blocked()
PROBE_POLL = 0.005  # s between looks at a half-open breaker whose probes are all out

# -- the scripts ----------------------------------------------------------------------------

# herdsim.policies.windows: TimeWindow (``kind`` 'time') and CountWindow ('count')
_WINDOWS = """
local BUCKETS = @BUCKETS@
local function advance(w, now)
  if w.kind == 'count' then return w.totals end
  local index = math.floor(now / w.width)
  if index ~= w.head then
    local stale = math.min(index - w.head, BUCKETS)
    for step = 1, stale do
      local bucket = w.buckets[(w.head + step) % BUCKETS + 1]
      for j = 1, #bucket do
        if bucket[j] ~= 0 then
          w.totals[j] = w.totals[j] - bucket[j]
          bucket[j] = 0
        end
      end
    end
    w.head = index
  end
  return w.totals
end
local function record(w, now, values)
  if w.kind == 'count' then
    if #w.entries == w.size then
      local oldest = table.remove(w.entries, 1)
      for j = 1, #oldest do w.totals[j] = w.totals[j] - oldest[j] end
    end
    table.insert(w.entries, values)
  else
    advance(w, now)
    local bucket = w.buckets[w.head % BUCKETS + 1]
    for j = 1, #values do bucket[j] = bucket[j] + values[j] end
  end
  for j = 1, #values do w.totals[j] = w.totals[j] + values[j] end
end
local function clear(w)
  if w.kind == 'count' then w.entries = {} else
    for i = 1, BUCKETS do for j = 1, #w.totals do w.buckets[i][j] = 0 end end
  end
  for j = 1, #w.totals do w.totals[j] = 0 end
end
local function new_window(spec)
  local k = tonumber(spec.k)
  local totals = {}
  for j = 1, k do totals[j] = 0 end
  if spec.kind == 'count' then
    return {kind = 'count', size = tonumber(spec.size), entries = {}, totals = totals}
  end
  local buckets = {}
  for i = 1, BUCKETS do
    buckets[i] = {}
    for j = 1, k do buckets[i][j] = 0 end
  end
  return {kind = 'time', width = tonumber(spec.width), buckets = buckets, totals = totals,
          head = 0}
end
local function num(x) return string.format('%.17g', x) end
local st
if ARGV[1] == 'init' then  -- ARGV[2]: the state as name value ... ('window.' names)
  local raw = cjson.decode(ARGV[2])
  st = {}
  local spec = {}
  for name, value in pairs(raw) do
    if string.sub(name, 1, 7) == 'window.' then spec[string.sub(name, 8)] = value
    else st[name] = value end
  end
  st.window = new_window(spec)
  redis.call('SET', KEYS[1], cmsgpack.pack(st), 'NX')
  return 1
end
st = cmsgpack.unpack(redis.call('GET', KEYS[1]))
if ARGV[1] == 'peek' then  -- the fields named in ARGV[2...], then the window's totals
  local out = {}
  for i = 2, #ARGV do
    local v = st[ARGV[i]]
    if type(v) == 'number' then out[#out + 1] = num(v) else out[#out + 1] = tostring(v) end
  end
  for j = 1, #st.window.totals do out[#out + 1] = num(st.window.totals[j]) end
  return out
end
local op, now = ARGV[1], tonumber(ARGV[2])
if st.now ~= nil and now < st.now then now = st.now end  -- time never goes backwards
st.now = now
""".replace("@BUCKETS@", str(TIME_BUCKETS))

# herdsim.policies.breaker.CircuitBreaker: ops blocked, permit, record
BREAKER_SCRIPT = _WINDOWS + """
local function transition(state)
  st.state = state
  if state == 'half_open' then
    st.probes_left = st.half_open_calls
    st.probe_successes = 0
  elseif state == 'closed' then
    clear(st.window)
  end
end
local function open()
  local duration = st.open_duration * st.multiplier ^ st.consecutive
  if st.max_open ~= false then duration = math.min(duration, st.max_open) end
  st.consecutive = st.consecutive + 1
  st.trips = st.trips + 1
  st.open_until = now + duration
  transition('open')
end
local answer = 0
if op == 'blocked' then  -- read only
  if st.state == 'open' then answer = (now < st.open_until) and 1 or 0
  elseif st.state == 'half_open' then answer = (st.probes_left == 0) and 1 or 0 end
  return {answer, st.state, num(st.open_until), st.probes_left}
elseif op == 'permit' then
  answer = 1
  if st.state ~= 'closed' then
    if st.state == 'open' then
      if now < st.open_until then
        answer = 0
      else
        transition('half_open')
      end
    end
    if st.state == 'half_open' then
      if st.probes_left > 0 then st.probes_left = st.probes_left - 1 else answer = 0 end
    end
  end
else  -- record: ARGV[3] failed, ARGV[4] slow (0 or 1)
  local failed, slow = tonumber(ARGV[3]), tonumber(ARGV[4])
  if st.state == 'closed' then
    record(st.window, now, {1, failed, slow})
    local t = st.window.totals
    local calls, failures, slows = t[1], t[2], t[3]
    if calls >= st.minimum_calls and (failures / calls >= st.failure_rate_threshold
        or slows / calls >= st.slow_call_rate_threshold) then
      open()
    end
  elseif st.state == 'half_open' then
    if failed == 1 or slow == 1 then
      open()
    else
      st.probe_successes = st.probe_successes + 1
      if st.probe_successes >= st.half_open_calls then
        st.consecutive = 0
        transition('closed')
      end
    end
  end
end
redis.call('SET', KEYS[1], cmsgpack.pack(st))
return {answer, st.state, num(st.open_until), st.probes_left}
"""

# herdsim.policies.budgets: ops call (allow_call), retry (allow_retry), result (on_result)
BUDGET_SCRIPT = _WINDOWS + """
local allowed, cost = 1, 0
local kind = st.kind
if op == 'call' then  -- ARGV[3] first (0 or 1), ARGV[4] a uniform draw
  local first = ARGV[3] == '1'
  if kind == 'token' then
    if first then st.tokens = math.min(st.capacity, st.tokens + st.success_refund) end
  elseif kind == 'adaptive' then
    local t = advance(st.window, now)
    local requests, accepts = t[1], t[2]
    local p = math.max(0, (requests - st.k * accepts) / (requests + 1))
    if not (p == 0 or tonumber(ARGV[4]) >= p) then
      allowed = 0
      record(st.window, now, {1, 0})
    end
  elseif kind == 'cumulative' then
    if first then st.first_tries = st.first_tries + 1 end
  end
elseif op == 'retry' then  -- ARGV[3] timed out, ARGV[4] throttled (0 or 1)
  if kind == 'token' then
    if ARGV[3] == '1' then cost = st.timeout_cost
    elseif ARGV[4] == '1' then cost = st.throttling_cost
    else cost = st.retry_cost end
    local left = st.tokens - cost
    local ok
    if st.strict then ok = left > st.floor else ok = left >= st.floor end
    if ok then st.tokens = left else allowed, cost = 0, 0 end
  elseif kind == 'ratio' then
    local t = advance(st.window, now)
    if t[2] + 1 <= st.ratio * t[1] + st.reserve then
      record(st.window, now, {0, 1})
      cost = 1
    else
      allowed = 0
    end
  elseif kind == 'cumulative' then
    if not (st.failures / st.first_tries <= st.ratio) then allowed = 0 end
  end
else  -- result: ARGV[3] ok (0 or 1), ARGV[4] what its retry paid
  local ok, paid = ARGV[3] == '1', tonumber(ARGV[4])
  if kind == 'token' then
    if ok then
      local earned = nil
      if st.refund_retry_cost and paid ~= 0 then earned = paid
      elseif not st.gates_calls then earned = st.success_refund end
      if earned ~= nil then st.tokens = math.min(st.capacity, st.tokens + earned) end
    elseif st.failure_cost ~= 0 then
      st.tokens = math.max(0, st.tokens - st.failure_cost)
    end
  elseif kind == 'adaptive' then
    record(st.window, now, {1, ok and 1 or 0})
  elseif kind == 'ratio' then
    if paid == 0 then record(st.window, now, {1, 0}) end
  elseif not ok then
    st.failures = st.failures + 1
  end
end
redis.call('SET', KEYS[1], cmsgpack.pack(st))
return {allowed, num(cost)}
"""


def _window(window: TimeWindow | CountWindow, k: int) -> dict:
    if isinstance(window, CountWindow):
        return {"window.kind": "count", "window.size": window.size, "window.k": k}
    return {"window.kind": "time", "window.width": window.width, "window.k": k}


def breaker_state(breaker: CircuitBreaker) -> dict:
    """The shared state's first value: *breaker*'s parameters and its initial state."""
    cfg = breaker.cfg
    return {**_window(breaker.window, 3), "state": breaker.state,
            "open_until": breaker.open_until, "trips": breaker.trips,
            "consecutive": breaker._consecutive_trips, "probes_left": breaker._probes_left,
            "probe_successes": breaker._probe_successes,
            "failure_rate_threshold": cfg.failure_rate_threshold,
            "slow_call_rate_threshold": cfg.slow_call_rate_threshold,
            "minimum_calls": cfg.minimum_calls, "open_duration": cfg.open_duration,
            "multiplier": cfg.open_duration_multiplier,
            "max_open": False if cfg.max_open_duration is None else cfg.max_open_duration,
            "half_open_calls": cfg.half_open_calls}


def budget_state(budget) -> dict:
    """The shared state's first value: *budget*'s parameters and its initial state."""
    if isinstance(budget, TokenBucketBudget):
        return {"kind": "token", "window.kind": "count", "window.size": 1, "window.k": 0,
                **{name: getattr(budget, name) for name in (
                    "capacity", "tokens", "retry_cost", "timeout_cost", "throttling_cost",
                    "failure_cost", "success_refund", "refund_retry_cost", "floor", "strict",
                    "gates_calls")}}
    if isinstance(budget, AdaptiveThrottle):
        return {"kind": "adaptive", "k": budget.k, **_window(budget.window, 2)}
    if isinstance(budget, RatioBudget):
        return {"kind": "ratio", "ratio": budget.ratio, "reserve": budget.reserve,
                **_window(budget.window, 2)}
    if isinstance(budget, CumulativeRatio):
        return {"kind": "cumulative", "ratio": budget.ratio, "first_tries": 0, "failures": 0,
                "window.kind": "count", "window.size": 1, "window.k": 0}
    raise TypeError(f"no shared form of {type(budget).__name__}")


# -- one face for the workers -----------------------------------------------------------------


async def peek(guard: SharedBreaker | SharedBudget, *names: str) -> list[float | str]:
    """The shared state's fields *names*, then its window's running totals (a number is
    exact; ``trips`` of a breaker, ``tokens`` of a token bucket, ...)."""
    values = await guard.script(keys=[guard.key], args=["peek", *names])
    out: list[float | str] = []
    for value in values:
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            out.append(float(text))
        except ValueError:
            out.append(text)
    return out


class _Waiting:
    """What the workers a breaker holds wait on: one look-out per breaker and process
    (not one per waiting worker) sleeps until the open period ends, then looks again
    every ``PROBE_POLL`` while the half-open probes are out, and releases them all
    together once it lets calls through, as the simulation's gate wakes its waiters."""

    _lookout: asyncio.Task | None = None

    async def blocked(self, now: float) -> bool:
        raise NotImplementedError

    def _open_until(self) -> float:
        raise NotImplementedError

    async def wait_unblocked(self, now: Callable[[], float]) -> None:
        if self._lookout is None or self._lookout.done():
            self._lookout = asyncio.create_task(self._look_out(now))
        await asyncio.shield(self._lookout)

    async def _look_out(self, now: Callable[[], float]) -> None:
        while await self.blocked(now()):
            await asyncio.sleep(max(self._open_until() - now(), PROBE_POLL))

    async def stop_waiting(self) -> None:
        """Cancel the look-out (the run is over)."""
        if self._lookout is not None:
            self._lookout.cancel()
            await asyncio.gather(self._lookout, return_exceptions=True)


class LocalBreaker(_Waiting):
    """A breaker of one worker's own (the policies' object), awaited like a shared one."""

    def __init__(self, breaker: CircuitBreaker):
        self.breaker = breaker

    @property
    def state(self) -> str:
        return self.breaker.state

    async def trips(self) -> int:
        """Times it opened."""
        return self.breaker.trips

    @property
    def open_until(self) -> float:
        return self.breaker.open_until

    def _open_until(self) -> float:
        return self.breaker.open_until

    async def blocked(self, now: float) -> bool:
        return self.breaker.blocked(now)

    async def permit(self, now: float) -> bool:
        return self.breaker.permit(now)

    async def record(self, now: float, failed: bool, slow: bool = False) -> None:
        self.breaker.record(now, failed, slow)


class SharedBreaker(_Waiting):
    """The pool's one breaker, kept in Redis (``BREAKER_KEY``): :attr:`state` and
    :attr:`open_until` are as of this process's last call to it. :meth:`blocked`, which
    the workers held by the breaker ask over and over, answers from those within
    ``REFRESH`` of that call while they are certain (open before its end, or closed: a
    process's own changes are always in them; another process's reach it within
    ``REFRESH``), and asks Redis once an open period ends (who took the half-open probes
    is Redis's to say); :meth:`permit` and :meth:`record` always go to Redis."""

    def __init__(self, redis, breaker: CircuitBreaker, key: str = BREAKER_KEY):
        self.redis = redis
        self.key = key
        self.script = redis.register_script(BREAKER_SCRIPT)
        self._first = breaker_state(breaker)
        self.state = breaker.state
        self.open_until = breaker.open_until
        self._probes_left = 0
        self._fresh = -math.inf  # when the cached state was read

    async def trips(self) -> int:
        """Times the pool's breaker opened (every process's calls together)."""
        count = (await peek(self, "trips"))[0]  # then the window's totals
        return int(count)

    async def init(self) -> None:
        """Create the shared state (the breaker given, as it is now) unless a process did
        already."""
        await self.script(keys=[self.key], args=["init", json.dumps(self._first)])

    async def _run(self, now: float, *args: object) -> bool:
        answer, state, open_until, probes = await self.script(keys=[self.key],
                                                              args=[args[0], repr(now), *args[1:]])
        self.state = state.decode() if isinstance(state, bytes) else state
        self.open_until = float(open_until)
        self._probes_left = int(probes)
        self._fresh = now
        return bool(answer)

    def _open_until(self) -> float:
        return self.open_until

    async def blocked(self, now: float) -> bool:
        if now - self._fresh < REFRESH:
            if self.state == OPEN and now < self.open_until:
                return True  # an open period is never cut short by another process
            if self.state == CLOSED:
                return False
        # stale, or an open period that has ended: another process may already hold the
        # half-open probes, which only Redis knows
        return await self._run(now, "blocked")

    async def permit(self, now: float) -> bool:
        return await self._run(now, "permit")

    async def record(self, now: float, failed: bool, slow: bool = False) -> None:
        await self._run(now, "record", int(failed), int(slow))


class LocalBudget:
    """A budget of one worker's own (the policies' object), awaited like a shared one."""

    def __init__(self, budget):
        self.budget = budget
        self.gates_calls = budget.gates_calls

    async def allow_call(self, now: float, first: bool = False) -> bool:
        return self.budget.allow_call(now, first)

    async def allow_retry(self, now: float, timed_out: bool,
                          throttled: bool = False) -> tuple[bool, float]:
        return self.budget.allow_retry(now, timed_out, throttled)

    async def on_result(self, now: float, ok: bool, paid: float) -> None:
        self.budget.on_result(now, ok, paid)


class SharedBudget:
    """The pool's one budget, kept in Redis (``BUDGET_KEY``). An adaptive throttle's
    :meth:`allow_call` sends a uniform *draw* with every call, for the script to compare
    with its rejection probability (the pure object draws only when that is not 0)."""

    def __init__(self, redis, budget, draw: Callable[[], float], key: str = BUDGET_KEY):
        self.redis = redis
        self.key = key
        self.gates_calls = budget.gates_calls
        self.script = redis.register_script(BUDGET_SCRIPT)
        self._first = budget_state(budget)
        self._draw = draw if isinstance(budget, AdaptiveThrottle) else (lambda: 0.0)

    async def init(self) -> None:
        """Create the shared state (the budget given, as it is now) unless a process did
        already."""
        await self.script(keys=[self.key], args=["init", json.dumps(self._first)])

    async def allow_call(self, now: float, first: bool = False) -> bool:
        allowed, _ = await self.script(keys=[self.key], args=[
            "call", repr(now), int(first), repr(self._draw())])
        return bool(allowed)

    async def allow_retry(self, now: float, timed_out: bool,
                          throttled: bool = False) -> tuple[bool, float]:
        allowed, cost = await self.script(keys=[self.key], args=[
            "retry", repr(now), int(timed_out), int(throttled)])
        return bool(allowed), float(cost)

    async def on_result(self, now: float, ok: bool, paid: float) -> None:
        await self.script(keys=[self.key], args=["result", repr(now), int(ok), repr(paid)])

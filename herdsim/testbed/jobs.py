"""Jobs on the wire: the Redis keys, the payload, and the delayed set's poller.

A job travels as ``id,poison,attempts,retries,prev`` (ASCII): what a requeued job must
carry for its next attempt to continue where the last one stopped. The main queue is the
list ``MAIN`` (RPUSH by the producer, BLPOP by workers), retries wait in the sorted set
``DELAYED`` scored by their due time (ZADD), and jobs that give up go to the list ``DLQ``.
"""

from __future__ import annotations

from dataclasses import dataclass

MAIN, DELAYED, DLQ = "herdsim:queue", "herdsim:delayed", "herdsim:dlq"
POLL_BATCH = 1000  # due jobs moved per script call (Lua's unpack has a stack limit)

# Move the due members of KEYS[1] (score <= ARGV[1]), lowest score first, to the tail of
# the list KEYS[2]; return how many were moved. One script: atomic in Redis.
MOVE_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due > 0 then
  redis.call('RPUSH', KEYS[2], unpack(due))
  redis.call('ZREM', KEYS[1], unpack(due))
end
return #due
"""

# RPUSH ARGV[2] onto KEYS[1] unless the list already holds ARGV[1] items; 1 if pushed.
PUSH_LIMITED = """
if redis.call('LLEN', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('RPUSH', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


@dataclass(slots=True)
class WireJob:
    """A job as a worker holds it (the model's ``Job`` fields, sent between processes)."""

    id: int
    poison: bool
    attempts: int
    retries: int
    prev: float
    paid: float = 0.0

    def encode(self) -> bytes:
        return (f"{self.id},{int(self.poison)},{self.attempts},{self.retries},"
                f"{self.prev!r}").encode()

    @classmethod
    def decode(cls, payload: bytes) -> WireJob:
        job, poison, attempts, retries, prev = payload.split(b",")
        return cls(int(job), poison == b"1", int(attempts), int(retries), float(prev))


async def move_due(redis, now: float) -> int:
    """The poller's step: every job of ``DELAYED`` due by *now* onto ``MAIN``, in due
    order; returns how many moved."""
    moved = 0
    while True:
        n = await redis.eval(MOVE_DUE, 2, DELAYED, MAIN, repr(now), POLL_BATCH)
        moved += n
        if n < POLL_BATCH:
            return moved

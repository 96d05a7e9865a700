"""A fixed limit: Netflix concurrency-limits' ``FixedLimit``, a semaphore of ``limit``."""

from __future__ import annotations


class FixedLimit:
    """Admit at most ``limit`` calls at once; samples change nothing."""

    def __init__(self, limit: int = 20):
        self.limit = limit

    def limit_at(self, now: float) -> int:
        return self.limit

    def sample(self, now: float, start: float, inflight: int, dropped: bool) -> None:
        """A fixed limit learns nothing."""

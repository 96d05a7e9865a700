"""The collapse guard: the rule that crashes the downstream when too much lands at once.

It trips when more than ``threshold`` calls arrived within the last ``window`` (a
synchronised herd), or when in service + waiting reaches ``load_limit``. Why the rule
looks at rate: see docs/model.md, Overload.
"""

from __future__ import annotations

from collections import deque


class CollapseGuard:
    """Admission-time check of ``overload.collapse``; the health part does the crashing."""

    def __init__(self, cfg):
        self.threshold = cfg.threshold
        self.window = cfg.window
        self.load_limit = cfg.load_limit
        self._recent: deque[float] = deque()

    def overloaded(self, now: float, load: int) -> bool:
        """Whether a call arriving at *now* with *load* calls in the system crashes it."""
        if self.threshold is not None:
            recent = self._recent
            recent.append(now)
            horizon = now - self.window
            while recent[0] <= horizon:
                recent.popleft()
            if len(recent) > self.threshold:
                return True
        return self.load_limit is not None and load >= self.load_limit

    def clear(self) -> None:
        """Forget the arrivals seen (every call in flight has just failed)."""
        self._recent.clear()

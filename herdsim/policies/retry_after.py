"""A server's Retry-After meets the policy's sleep: the sleep a client then takes."""

from __future__ import annotations

from collections.abc import Callable


def rule(mode: str, limit: float | None = None) -> Callable[[float, float], float] | None:
    """``heed(pause, hint)``: the sleep after a throttling answer that carried *hint*, the
    policy having drawn *pause*. ``use`` sleeps the hint; ``at_least`` the longer of the
    two, the hint lengthening the pause by at most *limit* (botocore's standard mode:
    ``max(t, min(retry_after, t + 5))``). None for ``ignore``."""
    if mode == "ignore":
        return None
    if mode == "use":
        return lambda pause, hint: hint
    if limit is None:
        return lambda pause, hint: hint if hint > pause else pause
    return lambda pause, hint: max(pause, min(hint, pause + limit))

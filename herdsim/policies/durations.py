"""Human durations: ``250ms``, ``10s``, ``2m``, ``1h``, or a bare number of seconds."""

from __future__ import annotations

import re

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([a-zµ]*)\s*$")


def parse_duration(value: object) -> float:
    """Return *value* in seconds; raise ``ValueError`` naming the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 250ms, 10s or 2m, got a boolean")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # a whole number of 400 digits
            raise ValueError(f"{str(value)[:12]}… is too large for a duration") from None
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match and match.group(2) in _UNITS | {"": 1.0}:
            return float(match.group(1)) * _UNITS.get(match.group(2), 1.0)
    raise ValueError(f"expected a duration such as 250ms, 10s or 2m, got {value!r}")


def format_duration(seconds: float) -> str:
    """Render seconds the way scenario files write them (``0.25`` -> ``250ms``)."""
    if seconds == 0:
        return "0s"
    if abs(seconds) < 1:
        return f"{seconds * 1000:g}ms"
    if abs(seconds) >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def json_schema(exclusive: bool) -> dict:
    """A duration in a JSON Schema (what an editor checks as the user types): a number
    of seconds > 0 (*exclusive*) or >= 0, or a string with a unit."""
    units = "|".join(sorted(_UNITS, key=len, reverse=True))
    bound = {"exclusiveMinimum": 0} if exclusive else {"minimum": 0}
    return {"anyOf": [{"type": "number", **bound},
                      {"type": "string", "pattern": rf"^\s*\+?(\d+\.?\d*|\.\d+)"
                                                    rf"([eE][-+]?\d+)?\s*({units})?\s*$"}],
            "description": "seconds, or a duration such as 250ms, 10s, 2m"}

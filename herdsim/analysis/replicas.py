"""The summary's ``replicas``: each tier with replicas, each replica's numbers at the end
of the run (calls sent to it, calls it answered with anything but success, ejections,
its state), and the time-series columns of a service's fleet.

``replicas.<tier>.<i>`` holds ``calls``, ``failures``, ``ejections`` (0 without outlier
detection) and ``state``: ``up``, ``down`` (an outage or crash has it down), ``ejected``
(outlier detection) or ``unhealthy`` (failing its health checks). A run without replicas
has no ``replicas``.
"""

from __future__ import annotations

from typing import Any

STATES = ("up", "down", "ejected", "unhealthy")
COUNTS = ("calls", "failures", "ejections")


def summarize(fleets: dict) -> dict[str, dict[str, dict[str, Any]]]:
    """``replicas``: tier -> replica number (text, as JSON keys are) -> its numbers."""
    return {name: {str(i): {"calls": len(f.calls[i]), "failures": f.failures[i],
                            "ejections": len(f.ejections[i]) if f.ejections else 0,
                            "state": f.state(i)}
                   for i in range(f.n)}
            for name, f in fleets.items()}


def flat(replicas: dict) -> dict[str, Any]:
    """*replicas* spread into ``replicas.<tier>.<i>.<key>`` entries (a table's columns)."""
    return {f"replicas.{tier}.{i}.{key}": value for tier, rows in replicas.items()
            for i, row in rows.items() for key, value in row.items()}


def problem(replicas: Any) -> str | None:
    """What is wrong with a summary's ``replicas``, if anything."""
    if not isinstance(replicas, dict) or not replicas:
        return "replicas must be an object of tiers"
    for tier, rows in replicas.items():
        if not isinstance(rows, dict) or not rows:
            return f"replicas.{tier} must be an object of replicas"
        for i, row in rows.items():
            where = f"replicas.{tier}.{i}"
            if not isinstance(row, dict):
                return f"{where} must be an object"
            for key in COUNTS:
                value = row.get(key)
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    return f"{where}.{key} must be a whole number >= 0, got {value!r:.40}"
            if row.get("state") not in STATES:
                return f"{where}.state must be one of {', '.join(STATES)}"
    return None


def fleet_counter(name: str) -> bool:
    """Whether a tier's counter *name* is its fleet's (written as ``<tier>_<name>``)."""
    return name.startswith("replica") or name == "no_healthy_host"

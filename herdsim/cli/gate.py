"""``--fail-if 'KPI OP VALUE'``: a CI gate on the summary's KPIs (exit code 3 when any holds).

KPI is a key of the KPI registry (``herdsim.analysis.kpis``), OP one of ``< <= > >= == !=``,
VALUE a number (durations and percentages allowed: ``30s``, ``95%``) or, for a text KPI
such as ``state``, a word. A KPI that did not happen within the run (its ``unreached``:
a recovery) counts as infinitely long (``recovery_time > 30`` holds); any other
undefined KPI (n/a) never satisfies a condition. On a comparison a condition holds when
it holds for any arm.
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from herdsim.analysis.kpis import BY_KEY, show, undefined
from herdsim.analysis.metastability import recovery_or_inf
from herdsim.errors import UsageError
from herdsim.policies.durations import parse_duration

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*(\S.*?)\s*$")


@dataclass(frozen=True)
class Condition:
    """One parsed ``--fail-if`` condition."""

    text: str
    key: str
    op: str
    value: float | str

    def holds(self, summary: dict[str, Any]) -> bool:
        """Whether the condition holds for *summary* (see the module doc for n/a)."""
        actual = summary.get(self.key)
        if BY_KEY[self.key].unreached:  # the state module's rule: not reached is +inf
            actual = recovery_or_inf(actual, summary.get("outages") or 0)
            if math.isnan(actual):
                return False
        elif undefined(actual):
            return False
        if isinstance(self.value, str):
            return OPERATORS[self.op](str(actual), self.value)
        return OPERATORS[self.op](float(actual), self.value)  # type: ignore[arg-type]  # a number here


def parse(texts: list[str] | None) -> list[Condition]:
    """Parse every ``--fail-if``; a malformed one or an unknown KPI is a UsageError."""
    return [_parse(text) for text in texts or []]


def _parse(text: str) -> Condition:
    match = _CONDITION.match(text)
    if not match:
        raise UsageError(f"--fail-if {text!r}: expected 'KPI OP VALUE' with OP one of "
                         + " ".join(OPERATORS))
    key, op, raw = match.groups()
    kpi = BY_KEY.get(key)
    if kpi is None:
        raise UsageError(f"--fail-if {text!r}: {unknown(key)}")
    if kpi.kind == "text":
        if op not in ("==", "!="):
            raise UsageError(f"--fail-if {text!r}: {key} is text: use == or !=")
        return Condition(text, key, op, raw.strip("'\""))
    value = _number(text, raw, kpi.kind)
    if not math.isfinite(value):  # nothing compares true with NaN: it could never trip
        raise UsageError(f"--fail-if {text!r}: {raw!r} is not a finite number")
    return Condition(text, key, op, value)


def unknown(key: str) -> str:
    """``unknown KPI 'goodpt'; did you mean goodput?``, or where to look them up."""
    close = difflib.get_close_matches(key, list(BY_KEY), n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(close)}?" if close else
            "herdsim kpis lists them (e.g. state, goodput, recovery_time)")
    return f"unknown KPI {key!r}; {hint}"


def _number(text: str, raw: str, kind: str) -> float:
    try:
        if raw.endswith("%"):
            return float(raw[:-1]) / 100
        if kind == "flag" and raw.lower() in ("true", "false", "yes", "no"):
            return float(raw.lower() in ("true", "yes"))
        try:
            return float(raw)
        except ValueError:
            return parse_duration(raw)
    except ValueError:
        raise UsageError(f"--fail-if {text!r}: {raw!r} is not a number") from None


def failing(conditions: list[Condition], summaries: dict[str, dict]) -> list[str]:
    """Two lines per condition that holds: the arms (keys of *summaries*) it holds for
    with the value observed in each, as the tables show it, then the KPI registry's
    definition of the KPI:
    ``fail-if goodput < 0.9: holds for exponential (goodput 0.0593)`` and
    ``  goodput (× offered): successes per second after the last outage ...``."""
    lines = []
    for condition in conditions:
        key = condition.key
        held = [(name, summary) for name, summary in summaries.items()
                if condition.holds(summary)]
        if held:
            observed = ", ".join(f"{name} ({key} {show(key, summary.get(key), summary)})"
                                 for name, summary in held)
            lines.append(f"fail-if {condition.text}: holds for {observed}")
            lines.append(f"  {BY_KEY[key].definition(held[0][1])}")
    return lines

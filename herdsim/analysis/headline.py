"""Which tier a call graph's headline describes: the tier in most trouble.

A run of a call graph has one headline (``state``, ``capacity_rate``, the peaks,
``collapses`` and ``recovery_time``, what every table, the ranking, ``--fail-if`` and the
report read) and a ``tiers`` entry per tier. The headline is the worst tier's, named by
``headline_tier``: the worst state first (metastable, then degraded, then recovered), then
the most collapses, then the highest peak over capacity; on a full tie the tier nearest
the workers (the first listed). The top tier's own numbers are the run's, so a graph
whose top tier is the worst keeps its summary as it was.
"""

from __future__ import annotations

from herdsim.analysis.kpis import BY_KEY, REGISTRY
from herdsim.analysis.loops import KEYS as LOOPS
from herdsim.analysis.metastability import CLASSES

HEADLINE = tuple(kpi.key for kpi in REGISTRY if kpi.headline
                 and kpi.key not in LOOPS)  # the tier's keys (its loops: only if held down)
ORDER = {kpi.key: i for i, kpi in enumerate(REGISTRY)}  # summary.json's order


def worst(tiers: dict[str, dict]) -> str:
    """The name of the tier in most trouble (the module doc's order)."""
    def trouble(item: tuple[int, tuple[str, dict]]) -> tuple:
        index, (_, kpis) = item
        peak = kpis.get("peak_to_capacity")
        return (CLASSES.index(kpis["state"]), kpis["collapses"],
                -1.0 if peak is None else peak, -index)

    return max(enumerate(tiers.items()), key=trouble)[1][0]


def apply(summary: dict) -> dict:
    """*summary* with its headline keys taken from its worst tier and ``headline_tier``
    naming it (placed before the first headline key, ``state``); unchanged for a run of
    fewer than two tiers."""
    tiers = summary.get("tiers") or {}
    if len(tiers) < 2:
        return summary
    name = worst(tiers)
    first = next(key for key in summary if key in BY_KEY and BY_KEY[key].headline)
    out = {}
    for key, value in summary.items():
        if key == first:
            out["headline_tier"] = name
        out[key] = value
    if name != next(iter(tiers)):  # the top tier's numbers are the run's already
        out.update({key: tiers[name][key] for key in HEADLINE})
        out["peak_attempt_rate"] = tiers[name]["peak_calls"] / summary["peak_window"]
        out = _loops(out, tiers[name])
    return out


def _loops(summary: dict, tier: dict) -> dict:
    """*summary* with the loops of its headline tier *tier* (what held that tier down,
    :mod:`herdsim.analysis.loops`) in place of the top tier's, where the registry puts
    them (before the first key the registry lists after them)."""
    rest = {key: value for key, value in summary.items() if key not in LOOPS}
    mine = {key: tier[key] for key in LOOPS if key in tier}
    place = ORDER[LOOPS[0]]
    out: dict = {}
    for key, value in rest.items():
        if mine and ORDER.get(key, -1) > place:
            out.update(mine)
            mine = {}
        out[key] = value
    out.update(mine)
    return out

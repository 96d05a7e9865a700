"""KPIs are objects (issue 35): each computes itself from the run's frames and says how it
is presented; the surfaces ask the object and never switch on a KPI's key. A new KPI object
in the registry reaches the summary, the tables, the report, the figure and the gate with
no other edit."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

import herdsim
from herdsim.analysis import kpis
from herdsim.analysis.kpis import BY_KEY, KPI, REGISTRY, TIER_REGISTRY, Panel, on

matplotlib.use("Agg")

ROOT = Path(herdsim.__file__).parent
SURFACES = [*sorted((ROOT / "plots").glob("*.py")),
            *sorted((ROOT / "outputs" / "report").glob("*.py")), ROOT / "outputs" / "reading.py",
            ROOT / "results" / "comparison.py", ROOT / "results" / "result.py",
            ROOT / "cli" / "tables.py", ROOT / "cli" / "gate.py",
            ROOT / "analysis" / "headline.py"]
KEYS = {kpi.key for kpi in (*REGISTRY, *TIER_REGISTRY)}


def name_matches(tree: ast.AST) -> list[tuple[int, str]]:
    """Where *tree* switches on a KPI key: ``x == "key"`` (either side), ``x in ("key",
    ...)``, ``.startswith``/``.endswith`` with a part of a key, or a module constant that
    lists two keys or more (a table keyed by name). ``"key" in summary`` (is it there?)
    and ``summary["key"]`` (read its value) are not switches."""
    found = []

    def keyed(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in KEYS

    def listed(node: ast.AST) -> int:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return sum(keyed(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return sum(keyed(k) for k in node.keys if k is not None)
        return 0

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for left, op, right in zip([node.left, *node.comparators[:-1]], node.ops,
                                       node.comparators, strict=True):
                equal = isinstance(op, (ast.Eq, ast.NotEq)) and (keyed(left) or keyed(right))
                member = isinstance(op, (ast.In, ast.NotIn)) and listed(right)
                if equal or member:
                    found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith") and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and len(node.args[0].value) > 3:
            part = node.args[0].value
            if any(key.startswith(part) if node.func.attr == "startswith"
                   else key.endswith(part) for key in KEYS):
                found.append((node.lineno, ast.unparse(node)))
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                and listed(node.value) >= 2:
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


@pytest.mark.parametrize("path", SURFACES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_surface_switches_on_a_kpi_key(path):
    """Formatting, ranking direction, bounds, panels and special-case text come from the
    KPI object; a reintroduced ``if key == "latency_p99"`` fails here."""
    assert name_matches(ast.parse(path.read_text())) == []


@pytest.mark.parametrize("code", [
    'if key == "recovery_time": pass',
    'x = key in ("latency_p50", "latency_p99")',
    'y = key.startswith("latency")',
    'FIGURE = {"amplification": 1, "recovery_time": 2}',
    'WIDE = ("jobs_pending", "jobs_dead_lettered")',
])
def test_the_guard_catches_each_kind_of_name_match(code):
    assert name_matches(ast.parse(code))


def test_reading_a_kpi_by_its_key_is_not_a_name_match():
    code = 'if "state" in runs:\n    s = summary["recovery_time"]\n    t = show("goodput", v)'
    assert name_matches(ast.parse(code)) == []


def test_every_surface_panel_is_a_known_surface_with_distinct_places():
    """Each surface orders its KPIs without ties, so its order is the objects' own."""
    for registry in (REGISTRY, TIER_REGISTRY):
        for surface in kpis.SURFACES:
            orders = [kpi.panels[surface].order for kpi in on(surface, registry)]
            assert len(orders) == len(set(orders)), surface
        for kpi in registry:
            assert set(kpi.panels) <= set(kpis.SURFACES), kpi.key
            assert not kpi.upper or kpi.upper in BY_KEY, kpi.key


def test_a_summary_is_the_registry_in_its_order(tiny):
    """summarize is a loop over the registry: a run's keys are registry keys, in the
    registry's order (so that order is summary.json's), each computed or supplied."""
    order = [kpi.key for kpi in REGISTRY]
    keys = list(tiny.summary)
    assert set(keys) <= set(order)
    assert keys == sorted(keys, key=order.index)
    assert all(BY_KEY[key].compute is not None for key in keys)


@pytest.fixture(scope="module")
def tiny(make_scenario):
    scenario = herdsim.load_scenario(make_scenario(
        peak_window="20ms", downstream={"outages": [{"start": "500ms", "duration": "300ms"}]}))
    return herdsim.run(scenario)


RETRIES_PER_JOB = KPI(
    "retries_per_job", "retries per job", "retries/job", better="lower",
    meaning="retry sleeps drawn per job submitted", missing="no job submitted",
    compute=lambda run: run["retries_total"] / run["jobs_submitted"]
    if run["jobs_submitted"] else None,
    panels={"run": Panel(99), "compare": Panel(99, "retries/job"),
            "report": Panel(99, group="load on the downstream"),
            "figure": Panel(99, "Retries per job", "retries per job submitted")})


@pytest.fixture
def extended(monkeypatch):
    """The registry with one more KPI object, everywhere the registry is read."""
    original = kpis.REGISTRY
    longer = (*original, RETRIES_PER_JOB)
    for module in [m for name, m in sys.modules.items() if name.startswith("herdsim")]:
        if getattr(module, "REGISTRY", None) is original:
            monkeypatch.setattr(module, "REGISTRY", longer)
    monkeypatch.setitem(BY_KEY, RETRIES_PER_JOB.key, RETRIES_PER_JOB)
    return RETRIES_PER_JOB


def test_a_new_kpi_object_reaches_every_surface_with_no_other_edit(extended, make_scenario):
    from herdsim.cli import gate
    from herdsim.cli.tables import ranked_table, shown_keys
    from herdsim.outputs.report.page import render
    from herdsim.results.comparison import Comparison

    scenario = herdsim.load_scenario(make_scenario(
        peak_window="20ms", downstream={"outages": [{"start": "500ms", "duration": "300ms"}]}))
    result = herdsim.run(scenario)
    s = result.summary
    assert s["retries_per_job"] == pytest.approx(s["retries_total"] / s["jobs_submitted"])
    assert list(s)[-1] == "retries_per_job"  # its place in the registry
    assert "retries_per_job" in shown_keys(s)
    c = Comparison.from_result(result)
    assert "retries/job" in c.table().columns
    assert "retries/job" in [col.header for col in ranked_table(c).columns]
    page = render(c, kinds=())
    assert "retries per job (retries/job)" in page and "<code>retries_per_job</code>" in page
    titles = [" ".join(ax.get_title(loc).split()) for ax in c.plot("kpis").axes
              for loc in ("left", "center")]  # wrapped to the panel's width
    assert "Retries per job" in titles
    conditions = gate.parse(["retries_per_job >= 0"])
    assert gate.failing(conditions, {"tiny": s})[0].startswith("fail-if retries_per_job")


def test_arms_rank_by_the_objects_rank_panels_each_its_own_way():
    """A KPI's rank panel orders arms by its better direction, undefined last; a KPI of
    classes by its class, best first; an earlier place decides first."""
    frame = pd.DataFrame({"arm": list("abcd"), "grade": ["ok", "bad", "ok", "bad"],
                          "score": [1.0, 3.0, np.nan, 2.0]})
    score = {"key": "score", "label": "score", "panels": {"rank": Panel(2)}}
    grade = KPI("grade", "grade", kind="text", classes=("ok", "bad"),
                panels={"rank": Panel(1)})
    up = kpis.rank(frame, (KPI(better="higher", **score),))
    down = kpis.rank(frame, (KPI(better="lower", **score),))
    assert list(up["arm"]) == ["b", "d", "a", "c"] and list(down["arm"]) == ["a", "d", "b", "c"]
    both = kpis.rank(frame, (KPI(better="higher", **score), grade))
    assert list(both["arm"]) == ["a", "c", "b", "d"]
    assert list(both.columns) == list(frame.columns)

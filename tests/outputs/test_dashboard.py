"""``dashboards/herdsim.json``: importable into Grafana >= 9, and every query asks for a
metric herdsim really exports.

The exported names come from running the exporter on a tiny simulation, not from a list
copied here. (The integration test also runs every query against a real Prometheus.)
Budget: about 1 s.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import herdsim
from herdsim import load_scenario, run
from herdsim.outputs import openmetrics as prom

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "herdsim.json"
DATASOURCE = "${DS_PROMETHEUS}"
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset",
                "bool", "and", "or", "unless", "inf", "nan"}


def promql_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords,
    label names inside ``{}`` or ``by (...)``, durations or numbers."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", expr)  # grouping labels
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        following = expr[match.end():].lstrip()
        if not following.startswith("(") and match.group().lower() not in PROMQL_WORDS:
            names.add(match.group())
    return names


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


@pytest.fixture(scope="module")
def exported_names(tmp_path_factory, make_scenario) -> set[str]:
    """Sample names in the OpenMetrics text of a tiny simulated run with a breaker."""
    scenario = load_scenario(make_scenario(breaker={"enabled": True}))
    directory = tmp_path_factory.mktemp("run") / "out"
    herdsim.save(run(scenario), directory)
    text = prom.render(prom.load_run(directory), 1_700_000_000)[0]
    return {line.split("{", 1)[0] for line in text.splitlines() if not line.startswith("#")}


def targets(dashboard: dict) -> list[tuple[str, dict]]:
    return [(panel["title"], target) for panel in dashboard["panels"]
            for target in panel["targets"]]


def test_promql_metrics_finds_names_not_functions_or_labels():
    expr = ('histogram_quantile(0.9, sum by (le, arm) (rate(a_bucket{queue=~"$q", le!="x"}'
            '[10s]))) / on (arm) group_left max(b_total offset 1m) > bool 2')
    assert promql_metrics(expr) == {"a_bucket", "b_total"}


def test_it_is_a_grafana_9_import_with_a_prometheus_input(dashboard):
    (source,) = dashboard["__inputs"]
    assert (source["type"], source["pluginId"]) == ("datasource", "prometheus")
    assert f"${{{source['name']}}}" == DATASOURCE
    grafana = next(r for r in dashboard["__requires"] if r["id"] == "grafana")
    assert int(grafana["version"].split(".")[0]) >= 9
    assert dashboard["schemaVersion"] >= 36  # Grafana 9.0's schema
    kinds = {panel["type"] for panel in dashboard["panels"]}
    assert kinds <= {r["id"] for r in dashboard["__requires"] if r["type"] == "panel"}


def test_every_query_uses_the_input_datasource(dashboard):
    users = dashboard["panels"] + dashboard["templating"]["list"]
    users += [target for _, target in targets(dashboard)]
    assert all(user["datasource"] == {"type": "prometheus", "uid": DATASOURCE}
               for user in users)


def test_every_panel_queries_only_metrics_herdsim_exports(dashboard, exported_names):
    for title, target in targets(dashboard):
        names = promql_metrics(target["expr"])
        assert names, title
        assert names <= exported_names, (title, names - exported_names)
    for variable in dashboard["templating"]["list"]:
        metric, label = re.fullmatch(r"label_values\((\w+), *(\w+)\)",
                                     variable["query"]["query"]).groups()
        assert metric in exported_names and label == variable["name"]


def test_windows_are_fixed_and_short_enough_for_the_impulse(dashboard):
    """$__rate_interval assumes 15 s scrapes; herdsim samples every bin (100 ms). 250 ms
    holds the 2-3 samples rate() needs; 10 s only on the brief's own query."""
    for title, target in targets(dashboard):
        assert "$__" not in target["expr"], title
        windows = set(re.findall(r"\[([^\]]*)\]", target["expr"]))
        allowed = {"10s"} if target["expr"] == prom.RETRY_QUERY.replace(
            '"retry"', '"retry", queue=~"$queue", arm=~"$arm"') else {"250ms", "1s"}
        assert windows <= allowed, (title, windows)
    calls = [t["expr"] for _, t in targets(dashboard) if "downstream_calls_total" in t["expr"]]
    assert calls and all("[250ms]" in expr for expr in calls)


def test_every_panel_keeps_the_arms_apart(dashboard):
    """Per-arm series by default: every aggregation keeps ``arm`` (by clause or legend), or
    the panel is repeated over the arm variable; annotations come from downstream_up."""
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            if panel.get("repeat") == "arm":
                assert 'arm=~"$arm"' in expr
                continue
            for clause in re.findall(r"\bby\s*\(([^)]*)\)", expr):
                assert "arm" in [c.strip() for c in clause.split(",")], (panel["title"], expr)
            assert "{{arm}}" in target["legendFormat"], panel["title"]
    (down,) = [a for a in dashboard["annotations"]["list"] if a.get("expr")]
    assert promql_metrics(down["expr"]) == {"downstream_up"} and "by (arm)" in down["expr"]


def test_the_issue_panels_are_all_there(dashboard, exported_names):
    """The brief's query verbatim; and panels over executions, sleeps (heatmap and
    quantiles), downstream in flight and capacity, queue depth and breaker state."""
    exprs = [target["expr"] for _, target in targets(dashboard)]
    assert prom.RETRY_QUERY.replace('"retry"', '"retry", queue=~"$queue", arm=~"$arm"') in exprs
    used = set().union(*(promql_metrics(expr) for expr in exprs))
    gauges = set(prom.GAUGES.values()) | {prom.CAPACITY}
    assert gauges <= used
    assert any(e.startswith("histogram_quantile") for e in exprs)
    heatmap = [p for p in dashboard["panels"] if p["type"] == "heatmap"]
    assert heatmap and all(t["format"] == "heatmap" for p in heatmap for t in p["targets"])
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert len(set(titles)) == len(titles)
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(titles)


def test_the_default_time_range_keeps_a_backfill_in_view_for_a_day(dashboard):
    """A run backfilled with the default --start ends about when it was exported; the
    dashboard's default range (now-N) must still show it hours later, not 15 minutes."""
    frm = dashboard["time"]["from"]
    assert dashboard["time"]["to"] == "now" and frm.startswith("now-")
    amount, unit = int(frm[4:-1]), frm[-1]
    seconds = amount * {"m": 60, "h": 3600, "d": 86400}[unit]
    assert seconds >= 8 * 3600

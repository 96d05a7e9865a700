"""A call graph's headline follows the tier in trouble: the worst state, then the most
collapses, then the highest peak over capacity, then the tier nearest the workers; the
summary names it (``headline_tier``), the tables and the report say whose numbers they
are, and a comparison's ``summary.csv`` carries every tier's state, collapses and peak."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from conftest import graph
from typer.testing import CliRunner

import herdsim
from herdsim.analysis import headline
from herdsim.analysis.metastability import CLASSES

CRASHING = {  # steady load; the db is down 1 s, and more than 60 calls in 100 ms crash it
    "duration": "30s", "workload": {"rate": 20},
    "services.db.outages": [{"start": "10s", "duration": "1s", "mode": "down"}],
    "services.db.overload": {"collapse": {"window": "100ms", "threshold": 60,
                                          "restart_time": "300ms"}}}


def tier(state: str = "recovered", collapses: int = 0, peak: float | None = 0.5) -> dict:
    return {"state": state, "collapses": collapses, "peak_to_capacity": peak}


@pytest.mark.parametrize(("tiers", "expected"), [
    # the state first, whatever the crashes and peaks say
    ({"a": tier("recovered", 9, 40.0), "b": tier("degraded", 0, 0.1)}, "b"),
    ({"a": tier("degraded", 9, 40.0), "b": tier("metastable", 0, 0.1),
      "c": tier("recovered", 20, 90.0)}, "b"),
    # the same state: the most collapses, whatever the peaks say
    ({"a": tier("metastable", 1, 0.1), "b": tier("metastable", 0, 13.0)}, "a"),
    # the same state and collapses: the highest peak over capacity
    ({"a": tier("degraded", 2, 0.2), "b": tier("degraded", 2, 3.0),
      "c": tier("degraded", 2, 1.0)}, "b"),
    # an unbounded tier (no peak over capacity) is below any bounded one
    ({"a": tier(peak=None), "b": tier(peak=0.0)}, "b"),
    # a full tie: the tier nearest the workers (the first listed)
    ({"a": tier("degraded", 1, 2.0), "b": tier("degraded", 1, 2.0)}, "a"),
    ({"a": tier(peak=None), "b": tier(peak=None)}, "a"),
])
def test_the_worst_tier_is_by_state_then_collapses_then_peak_then_nearest(tiers, expected):
    assert headline.worst(tiers) == expected
    # the order of the other tiers does not matter, only who comes first on a tie
    later = {name: tiers[name] for name in reversed(tiers)}
    ties = [n for n in tiers if tiers[n] == tiers[expected]]
    assert headline.worst(later) == (expected if len(ties) == 1 else ties[-1])


def test_a_summary_takes_its_headline_from_the_worst_tier_and_names_it():
    """The worst tier's keys replace the run's; the top tier's are the run's already, so
    a top tier in most trouble changes nothing but the name; one tier: no headline."""
    top = {**tier("degraded", 0, 0.1), "capacity_rate": 1000.0, "peak_calls": 1,
           "peak_to_baseline": 1.5, "collapses_after_outage": 0, "recovery_time": 30.0}
    bottom = {**tier("metastable", 4, 12.0), "capacity_rate": 500.0, "peak_calls": 60,
              "peak_to_baseline": 20.0, "collapses_after_outage": 3, "recovery_time": None}
    run = {"seed": 1, "state": "degraded", "capacity_rate": 1000.0, "peak_window": 0.01,
           "peak_calls": 1, "peak_attempt_rate": 100.0, "peak_to_capacity": 0.1,
           "peak_to_baseline": 1.5, "collapses": 0, "collapses_after_outage": 0,
           "recovery_time": 30.0}
    out = headline.apply({**run, "tiers": {"top": top, "bottom": bottom}})
    assert out["headline_tier"] == "bottom"
    assert list(out)[:3] == ["seed", "headline_tier", "state"]
    for key in headline.HEADLINE:
        assert out[key] == bottom[key], key
    assert out["peak_attempt_rate"] * out["peak_window"] == pytest.approx(out["peak_calls"])
    calm = {**bottom, "state": "recovered", "collapses": 0}
    same = headline.apply({**run, "tiers": {"top": top, "bottom": calm}})
    assert same["headline_tier"] == "top"
    assert {k: v for k, v in same.items() if k != "headline_tier"} == {
        **run, "tiers": {"top": top, "bottom": calm}}
    alone = {**run, "tiers": {"top": top}}
    assert headline.apply(dict(alone)) == alone


@pytest.fixture(scope="module")
def crashing():
    """The db crashes in the burst after its outage while the workers recover."""
    return herdsim.run(herdsim.load_scenario(graph(**CRASHING)))


def test_a_crashing_bottom_tier_under_a_healthy_top_is_the_headline(crashing):
    s = crashing.summary
    front, db = s["tiers"]["front"], s["tiers"]["db"]
    assert front["state"] == "recovered" and front["collapses"] == 0  # the top is fine
    assert db["collapses"] >= 1
    assert s["headline_tier"] == "db"
    assert s["state"] == db["state"] and s["collapses"] == db["collapses"]
    assert s["collapses_after_outage"] == db["collapses_after_outage"]
    assert s["recovery_time"] == db["recovery_time"]
    capacity = 200 / 0.005  # the db's concurrency / mean service time
    assert s["capacity_rate"] == pytest.approx(capacity)
    assert s["peak_to_capacity"] == pytest.approx(s["peak_calls"] / (capacity * 0.01))
    assert s["peak_to_capacity"] == db["peak_to_capacity"]
    # the db's peak counted again from its time series: at least its busiest 100 ms bin
    # spread evenly (no bin holds more than 10 windows of 10 ms)
    busiest = crashing.timeseries["db_calls"].max()
    assert busiest / 10 <= s["peak_calls"] <= busiest


def test_every_tier_has_a_state_and_a_tier_that_crashes_to_the_end_is_metastable():
    """layers.yaml (30 s): the db crashes again and again after its blackhole; the state
    of each tier is one of the classes, the db's metastable (not recovered, crashing
    after the outage), and the run's headline is a tier at least as bad as the top."""
    res = herdsim.run(herdsim.load_scenario("scenarios/layers.yaml", {"duration": "30s"}))
    tiers = res.summary["tiers"]
    assert all(t["state"] in CLASSES for t in tiers.values())
    db = tiers["db"]
    assert db["collapses_after_outage"] > 0 and db["recovery_time"] is None
    assert db["state"] == "metastable"
    rank = CLASSES.index
    assert rank(res.summary["state"]) >= rank(tiers["frontend"]["state"])


@pytest.mark.slow
def test_a_graph_comparisons_summary_csv_has_each_tiers_state_collapses_and_peak(tmp_path):
    data = graph(**{**CRASHING, "duration": "16s"})
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "cmp"
    from herdsim.cli import app

    done = CliRunner().invoke(app, ["compare", str(path), "--strategies",
                                    "exponential,full_jitter", "--processes", "1",
                                    "--out", str(out), "--format", "png"],
                              env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    summary = pd.read_csv(out / "summary.csv")
    runs = pd.read_csv(out / "runs.csv")
    for name in ("front", "api", "db"):
        for key in ("state", "collapses", "peak_to_capacity"):
            assert f"tiers.{name}.{key}" in summary, (name, key)
        assert set(summary[f"tiers.{name}.state"]) <= set(CLASSES)
        collapses = f"tiers.{name}.collapses"
        assert list(summary[collapses]) == list(runs[collapses])
        assert summary[collapses].dtype.kind == "i"  # whole numbers, as written
    assert set(summary["headline_tier"]) == {"db"}
    assert list(summary["collapses"]) == list(summary["tiers.db.collapses"])
    # the ranked table says whose the headline is: a tier column naming it
    header = next(line for line in done.stdout.splitlines()
                  if line.split()[:2] == ["#", "arm"])
    assert "tier" in header.split()
    rows = [line.split() for line in done.stdout.splitlines()
            if line.split()[:1] in (["1"], ["2"])]
    assert len(rows) == 2 and all(row[3] == "db" for row in rows)  # #, arm, state, tier


@pytest.mark.slow
def test_the_run_table_names_the_headline_tier_on_its_rows(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(graph(**{**CRASHING, "duration": "16s"})))
    from herdsim.cli import app

    done = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "o")],
                              env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["headline_tier"] == "db"
    lines = done.stdout.splitlines()
    for label in ("state (db)", "collapses (crashes) (db)", "recovery time (db)"):
        assert any(label in line for line in lines), label
    assert not any("succeeded fraction (db)" in line for line in lines)


def test_the_reports_verdict_names_the_headline_tier(crashing):
    from herdsim.outputs.report.verdict import verdict
    from herdsim.results.comparison import Comparison

    s = crashing.summary
    (line,) = [x for x in verdict(Comparison.from_result(crashing))[1:] if x.startswith(
        crashing.scenario.retry.strategy)]
    assert f"{s['state']} (db, the worst of 3 tiers)" in line
    n = s["collapses_after_outage"]
    assert f"{n} crash{'es' * (n != 1)} of db after the outage" in line
    assert "× db capacity" in line


def test_a_graphs_heading_names_the_tier_the_jobs_load_most(scenarios_dir):
    """The heading's load is the busiest tier's, not the top tier's (layers.yaml read
    "0% of frontend's capacity" while its database ran at 16%): 400 jobs/s, one db call
    each when nothing fails, against 50 slots / 20 ms; with a fan-out of 3 to the api and
    the api's capacity cut to 1,000 calls/s, the api (1,200 calls/s: 120%) leads."""
    from herdsim.plots.describe import facts

    layers = herdsim.load_scenario(scenarios_dir / "layers.yaml")
    assert "(16% of db's capacity 2,500 calls/s, the most loaded tier)" in facts(layers)
    fanned = herdsim.load_scenario(scenarios_dir / "layers.yaml", overrides={
        "downstream.calls.0.count": "3", "services.api.concurrency": "5"})
    assert "(120% of api's capacity 1,000 calls/s, the most loaded tier)" in facts(fanned)

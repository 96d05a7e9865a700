"""The summary's ``replicas`` (``analysis/replicas.py``): each replica's calls, failures,
ejections and state, checked against the time series and the model's own state; absent
without replicas; a service's fleet written as ``<service>_replica{i}_*`` columns; the
reader's checks and the run table's rows."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import SCENARIOS, graph, tiny

import herdsim
from herdsim.analysis import replicas, tiers
from herdsim.cli.replica_table import SHOWN, replica_tables
from herdsim.config.loading import validate
from herdsim.model.simulation import Simulation
from herdsim.outputs.reading import summary_problem
from herdsim.results.result import Result


def fleet(outage=None, **down):
    section = {"replicas": 4, "concurrency": 5, "timeout": 5.0,
               "service": {"distribution": "exponential", "mean": 0.05},
               "outages": [outage] if outage else [], **down}
    return validate(tiny(duration=20, workload={"rate": 100}, workers={"count": 30},
                         downstream=section))


def test_each_replicas_calls_and_failures_are_its_own():
    """Replica 2 is down for 5 s; the waiting rooms are unbounded and the timeout far
    above any wait at 25% load, so the only failures are its refusals and the calls it
    held when it went down (failed at t0: about one per replica at this load, far below
    a tenth of the refusals); the other replicas have none, and every replica's calls
    are its column's."""
    res = herdsim.run(fleet({"mode": "down", "start": 5, "duration": 5, "replica": 2}))
    rows = res.summary["replicas"]["downstream"]
    ts = res.timeseries
    assert [rows[str(i)]["calls"] for i in range(4)] == [
        int(ts[f"replica{i}_calls"].sum()) for i in range(4)]
    refused = int(ts["rejected"].sum())
    assert refused > 0 and 0 <= rows["2"]["failures"] - refused < refused / 10
    assert [rows[str(i)]["failures"] for i in (0, 1, 3)] == [0, 0, 0]
    assert all(row["state"] == "up" and row["ejections"] == 0 for row in rows.values())


def test_a_replica_down_at_the_end_and_one_ejected():
    """States at the end: an outage past the end leaves its replica ``down``; with
    outlier detection it is ``ejected`` (its ejections those of its column)."""
    down = {"mode": "down", "start": 5, "duration": 15, "replica": 1}  # to the end
    plain = herdsim.run(fleet(down)).summary["replicas"]["downstream"]
    assert plain["1"]["state"] == "down"
    assert {plain[i]["state"] for i in "023"} == {"up"}
    res = herdsim.run(fleet(down, outlier_detection={
        "consecutive_5xx": 3, "max_ejection_percent": 50, "interval": 1.0,
        "base_ejection_time": 100.0}))
    rows = res.summary["replicas"]["downstream"]
    assert rows["1"]["state"] == "ejected"
    assert rows["1"]["ejections"] == int(res.timeseries["replica1_ejections"].sum()) >= 1


def test_no_replicas_no_entry():
    res = herdsim.run(validate(tiny()))
    assert "replicas" not in res.summary
    assert not any("replica" in c for c in res.timeseries.columns)


def test_a_services_fleet_is_written_and_summarized():
    """A graph's db with 3 replicas: its replicas' columns sum to the tier's calls, its
    gauges have a sample a bin, and the summary's rows are the columns' totals."""
    data = graph()
    data["services"]["db"].update(replicas=3, balancer={"kind": "least_request"},
                                  outlier_detection={"consecutive_5xx": 5})
    sc = validate(data)
    sim = Simulation(sc)
    res = Result.from_finished(sim.run())
    ts = res.timeseries
    calls = np.array([ts[f"db_replica{i}_calls"].to_numpy() for i in range(3)])
    assert (calls.sum(axis=0) == ts["db_calls"].to_numpy()).all() and calls.sum() > 0
    for i in range(3):
        assert ts[f"db_replica{i}_in_flight"].notna().all()
        assert set(ts[f"db_replica{i}_healthy"].unique()) <= {0.0, 1.0}
    rows = res.summary["replicas"]["db"]
    assert [rows[str(i)]["calls"] for i in range(3)] == list(calls.sum(axis=1))
    assert summary_problem(res.summary) is None
    flat = tiers.flat(res.summary)
    assert flat["replicas.db.0.calls"] == rows["0"]["calls"] and "replicas" not in flat


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: r["downstream"]["0"].update(calls=-1), "replicas.downstream.0.calls"),
    (lambda r: r["downstream"]["1"].update(failures=1.5), "replicas.downstream.1.failures"),
    (lambda r: r["downstream"]["0"].update(state="asleep"), "replicas.downstream.0.state"),
    (lambda r: r.update(downstream=[]), "replicas.downstream"),
])
def test_the_reader_refuses_a_broken_replicas_entry(change, expected):
    good = {"downstream": {str(i): {"calls": 3, "failures": 1, "ejections": 0,
                                    "state": "up"} for i in range(2)}}
    assert replicas.problem(good) is None
    bad = copy.deepcopy(good)
    change(bad)
    assert expected in replicas.problem(bad)


def test_a_large_fleet_shows_its_worst_replicas_and_a_note():
    rows = {str(i): {"calls": 100, "failures": 90 if i in (7, 40) else 0, "ejections": 0,
                     "state": "ejected" if i == 40 else "up"} for i in range(50)}
    (table,) = replica_tables({"replicas": {"api": rows}})
    shown = list(table.columns[0].cells)
    assert len(shown) == SHOWN - 2
    assert shown[:2] == ["0", "1"] and "7" in shown and "40" in shown
    assert f"the other {50 - len(shown)}" in str(table.caption)
    (small,) = replica_tables({"replicas": {"api": {k: rows[k] for k in "0123"}}})
    assert list(small.columns[0].cells) == ["0", "1", "2", "3"]


def test_the_bundled_fleet_ejects_the_sick_replica():
    """scenarios/fleet.yaml, cut short: replica 3 (down from 20 s) is the one that fails
    and the one ejected; the others are never ejected."""
    sc = herdsim.load_scenario(SCENARIOS / "fleet.yaml", {
        "duration": "40s", "downstream.outages.0.duration": "20s"})
    rows = herdsim.run(sc).summary["replicas"]["downstream"]
    worst = max(rows, key=lambda i: rows[i]["failures"])
    assert worst == "3" and rows["3"]["ejections"] >= 1
    assert all(rows[i]["ejections"] == 0 for i in rows if i != "3")

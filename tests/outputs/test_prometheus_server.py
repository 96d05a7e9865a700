"""The exported metrics in a real Prometheus: backfilled whole, the brief's query answering
exactly what ``herdsim.analysis.promql.rate`` computes, and the impulse visible where it should be.

``scenarios/outage.yaml`` runs under ``exponential`` and ``full_jitter`` (as the two arms of
a comparison directory), cut to 60 s: the exponential storm (retries 1, 3, 7, 15 s after the
outage at 20 s, and the crashes they cause) is over by then, and 90 s would only add tail.
The export is backfilled with ``promtool tsdb create-blocks-from openmetrics`` and served
by ``prometheus`` on a free port of 127.0.0.1
(``herdsim.outputs.prometheus_server.serve``, which stops it
by its pid). Needs ``promtool`` and ``prometheus`` (Debian: ``apt-get install prometheus``);
skipped without them, failed without them under CI. Budget: about 20 s (two simulations
in two processes, ~10 s; Prometheus starts in about a second).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import urllib.parse
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from herdsim import load_scenario, run
from herdsim.analysis.promql import rate
from herdsim.analysis.summary import peak_over_mean, storm_mask, storm_threshold
from herdsim.experiments.parallel import imap_unordered
from herdsim.outputs import prometheus_server as prometheus
from herdsim.outputs.openmetrics import SEED_QUERY

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "herdsim.json"
ARMS = ("exponential", "full_jitter")
STEP = 0.1  # s, query_range step: the run's bin
RETRY_BY_ARM = 'sum(rate(worker_job_execution_total{status="retry"}[10s])) by (queue, arm)'


pytestmark = [pytest.mark.slow, pytest.mark.requires("promtool", "prometheus")]


def prometheus_major() -> int:
    """Prometheus 3 made range windows open on the left; promql.rate needs to know."""
    out = subprocess.run(["prometheus", "--version"], capture_output=True, text=True)
    return int(re.search(r"version (\d+)\.", out.stdout + out.stderr).group(1))


@pytest.fixture(scope="module")
def outage(scenarios_dir):
    return load_scenario(scenarios_dir / "outage.yaml", {"duration": "60s"})


@pytest.fixture(scope="module")
def results(scenarios_dir) -> dict:
    """arm -> its Result (index order of ARMS)."""
    scenarios = [load_scenario(scenarios_dir / "outage.yaml",
                               {"duration": "60s", "retry.strategy": arm}) for arm in ARMS]
    return dict(imap_unordered(run, scenarios, processes=2))


@pytest.fixture(scope="module")
def compare_dir(outage, results, tmp_path_factory):
    """A comparison directory of the two arms (tidy frames with ``arm``)."""
    directory = tmp_path_factory.mktemp("compare")
    frames = {"timeseries": [], "sleeps": []}
    for index, arm in enumerate(ARMS):
        for name in frames:
            frame = getattr(results[index], name)
            frames[name].append(frame.assign(arm=arm, replication=0)[
                ["arm", "replication", *frame.columns]])
    for name, parts in frames.items():
        pd.concat(parts).to_csv(directory / f"{name}.csv", index=False)
    (directory / "scenario.yaml").write_text(outage.to_yaml())
    (directory / "arms.json").write_text(json.dumps({"replications": 1, "arms": [
        {"label": arm, "strategy": arm, "settings": {}} for arm in ARMS]}))
    pd.DataFrame([{"arm": arm, "replication": 0, **results[i].summary}
                  for i, arm in enumerate(ARMS)]).to_csv(directory / "runs.csv", index=False)
    return directory


@pytest.fixture(scope="module")
def server(compare_dir):
    with prometheus.serve(compare_dir) as running:
        yield running


def retry_counter(compare_dir, arm: str, start: float, bin_width: float) -> pd.Series:
    """The exported retry counter of *arm*, rebuilt from the frames (unix s index)."""
    ts = pd.read_csv(compare_dir / "timeseries.csv")
    ts = ts[ts["arm"] == arm]
    counts = (ts["retry"] + ts["recycled"]).to_numpy()
    edges = start + np.arange(len(counts) + 1) * bin_width
    return pd.Series(np.concatenate([[0], np.cumsum(counts)]), index=np.round(edges, 3))


def as_series(result: dict) -> pd.Series:
    values = result["values"]
    return pd.Series([float(v) for _, v in values], index=[float(t) for t, _ in values])


def test_prometheus_holds_every_sample_of_the_file(server):
    """count_over_time over the whole run, per metric name, equals the file's lines."""
    lines = server.export.path.read_text().splitlines()
    in_file = Counter(line.split("{", 1)[0] for line in lines if not line.startswith("#"))
    assert sum(in_file.values()) == server.export.samples
    span = math.ceil(server.export.end - server.export.start) + 2
    for name, count in in_file.items():
        (result,) = server.query(f"sum(count_over_time({name}[{span}s]))", server.export.end)
        assert int(float(result["value"][1])) == count, name


def test_the_seeds_query_equals_herdsim_promql(server, compare_dir, outage):
    """query_range of the brief's query, by arm and by queue, against promql.rate on the same
    counters: equal to floating-point noise."""
    start, end = server.export.start, server.export.end
    left_open = prometheus_major() >= 3
    ours = {arm: rate(retry_counter(compare_dir, arm, start, outage.bin), "10s", step=STEP,
                      start=start, end=end, left_open=left_open) for arm in ARMS}
    results = server.query_range(RETRY_BY_ARM, start, end, STEP)
    assert {r["metric"]["arm"] for r in results} == set(ARMS)
    for result in results:
        theirs = as_series(result)
        mine = ours[result["metric"]["arm"]].dropna()
        assert len(theirs) == len(mine) > 500
        assert np.allclose(theirs.to_numpy(), mine.to_numpy(), rtol=1e-9, atol=1e-9)
        assert np.allclose(theirs.index, mine.index, atol=1e-6)
    assert server.query_range(prometheus.RETRY_QUERY, start, end, STEP) == results
    # the brief's query verbatim adds the arms into one line: why it is not the default
    (total,) = server.query_range(SEED_QUERY, start, end, STEP)
    assert total["metric"] == {"queue": outage.queue}
    assert np.allclose(as_series(total).to_numpy(),
                       (ours["exponential"] + ours["full_jitter"]).dropna().to_numpy(),
                       rtol=1e-9, atol=1e-9)
    assert "arm" in urllib.parse.parse_qs(server.graph_url().split("?", 1)[1])["g0.expr"][0]


def test_the_exponential_arm_shows_the_impulse_and_full_jitter_does_not(server, outage):
    """The summary's measure on what Prometheus answers: the busiest point of the retry
    storm over its mean (from the outage until the rate is back under 1% of the offered
    load). A 10 s window smooths each synchronised wave into a 10 s plateau, yet the
    exponential waves still stand about twice as tall over their mean as full jitter's
    flat spread (measured 2.6 vs 1.3), so 1.5x leaves room on both sides."""
    start = server.export.start
    outage_start = min(o.start for o in outage.downstream.outages)
    threshold = storm_threshold(outage)
    peaks = {}
    for result in server.query_range(RETRY_BY_ARM, start, server.export.end, STEP):
        values = as_series(result)
        times = values.index.to_numpy() - start
        mask = storm_mask(values.to_numpy(), times, outage_start, threshold)
        assert mask.sum() > 10 / STEP  # a storm of more than one window
        peaks[result["metric"]["arm"]] = peak_over_mean(values.to_numpy()[mask])
    assert peaks["exponential"] > 1.5 * peaks["full_jitter"], peaks


def panel_queries(panel: dict, arm: str = ".*") -> list[tuple[str, str]]:
    """(refId, PromQL) of a panel with the variables set: ``$queue`` to all, ``$arm`` to
    *arm* (all, or one arm for a panel repeated over arms)."""
    return [(t["refId"], t["expr"].replace("$queue", ".*").replace("$arm", arm))
            for t in panel["targets"]]


def test_every_dashboard_query_answers(server):
    """Each panel's PromQL, with the dashboard's variables at "All", returns data."""
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for _, expr in panel_queries(panel):
            found = server.query_range(expr, server.export.start, server.export.end, 1)
            assert found, (panel["title"], expr)


# panel id -> (what is read off its series, the herdsim number it must rank like, sign):
# sign +1 when a larger series statistic goes with a larger number, -1 when reversed
RANKS = {
    1: ("mean after the outage", "goodput", +1),
    2: ("maximum", "peak_attempt_rate", +1),
    3: ("integral", "retries_total", +1),
    4: ("integral", "retries_total", +1),
    5: ("integral of failed_dlq", "jobs_dead_lettered", +1),
    6: ("mean in flight after the outage", "goodput", +1),
    7: ("backlog at the end", "jobs_pending", +1),
    8: ("time up after the outage", "collapses_after_outage", -1),
    9: ("median of the p50", "median sleep", +1),
    10: ("integral of the +Inf bucket", "retries_total", +1),
}


def panel_statistic(server, panel: dict, arm: str, outage_end: float) -> float:
    """The statistic of RANKS for *arm*, from the panel's own queries over the run."""
    start, end = server.export.start, server.export.end
    repeated = panel.get("repeat") == "arm"
    series: dict[str, pd.Series] = {}
    for ref, expr in panel_queries(panel, arm if repeated else ".*"):
        for result in server.query_range(expr, start, end, STEP):
            labels = result["metric"]
            if repeated or labels.get("arm") == arm:
                key = ref + "/" + labels.get("status", labels.get("le", ""))
                series[key] = as_series(result).set_axis(
                    as_series(result).index - start)
    how = RANKS[panel["id"]][0]
    after = {k: v[v.index >= outage_end] for k, v in series.items()}
    if how == "mean after the outage":
        return float(after["A/"].mean())
    if how == "maximum":
        return float(series["A/"].max())
    if how == "integral":
        return float(series["A/"].sum() * STEP)
    if how == "integral of failed_dlq":
        return float(series.get("A/failed_dlq", pd.Series([0.0])).sum() * STEP)
    if how == "mean in flight after the outage":
        return float(after["A/"].mean())
    if how == "backlog at the end":
        return float(series["A/"].iloc[-1] + series["B/"].iloc[-1])
    if how == "time up after the outage":
        return float(after["A/"].mean())
    if how == "median of the p50":
        return float(series["A/"].dropna().median())
    return float(series["A/+Inf"].sum())  # integral of the +Inf bucket


def test_every_panel_ranks_the_arms_as_herdsim_does(server, results, outage):
    """Each panel, read the way a reviewer reads it (RANKS), orders exponential and full
    jitter as herdsim's own summary (or sleeps) does. A 10 s window on the calls panel
    fails this: the recovering jittered arm reads as more load (issue 11)."""
    dashboard = json.loads(DASHBOARD.read_text())
    assert {panel["id"] for panel in dashboard["panels"]} == set(RANKS)
    outage_end = max(end for _, end in outage.outage_windows)
    herdsim_numbers = {}
    for index, arm in enumerate(ARMS):
        result = results[index]
        herdsim_numbers[arm] = {**result.summary,
                                "median sleep": float(result.sleeps["sleep"].median())}
    for panel in dashboard["panels"]:
        how, key, sign = RANKS[panel["id"]]
        stats = {arm: panel_statistic(server, panel, arm, outage_end) for arm in ARMS}
        ours = {arm: float(herdsim_numbers[arm][key]) for arm in ARMS}
        assert ours["exponential"] != ours["full_jitter"], key  # a ranking to check
        theirs = np.sign(stats["exponential"] - stats["full_jitter"]) * sign
        assert theirs == np.sign(ours["exponential"] - ours["full_jitter"]), (
            panel["title"], how, stats, key, ours)

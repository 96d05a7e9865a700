"""The OpenMetrics export: format rules, the backfill traps, and values traced to the frames.

Each test reads the written text back with a small independent parser and checks it
against the run's frames (or against the OpenMetrics / Prometheus rule it names), never
against numbers copied from a run. Budget: about 3 s.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import graph
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import herdsim
from herdsim import load_scenario
from herdsim.cli import app
from herdsim.outputs import openmetrics as prom

START = 1_700_000_000  # unix s
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


CONCURRENCY = 4  # downstream.concurrency of the scenario written


def write_run(directory: Path, n_bins: int = 50, bin_width: float = 0.1, seed: int = 0,
              arms: tuple[str, ...] = (), queue: str = "orders", breaker: bool = True) -> Path:
    """A synthetic output directory: random counts and gauges, random sleeps. With *arms*,
    a comparison directory (tidy frames with ``arm`` and ``replication``)."""
    rng = np.random.default_rng(seed)
    scenario = load_scenario({
        "name": "synthetic", "queue": queue, "bin": bin_width, "duration": n_bins * bin_width,
        "workload": {"rate": 10}, "downstream": {"concurrency": CONCURRENCY}})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scenario.yaml").write_text(scenario.to_yaml())
    frames, sleeps = [], []
    for arm in arms or (None,):
        ts = pd.DataFrame({"time": np.arange(n_bins) * bin_width})
        for column in ("arrivals", "attempts", "success", "retry", "failed_dlq", "recycled",
                       "rejected", "timeouts", "errors", "wasted", "refused", "crashes"):
            ts[column] = rng.poisson(5, n_bins)
        for column in ("in_flight", "waiting", "queue_depth", "delayed"):
            ts[column] = rng.integers(0, 100, n_bins).astype(float)
        ts["downstream_up"] = (rng.random(n_bins) < 0.8).astype(float)
        if breaker:
            ts["breaker_open"] = rng.random(n_bins).round(3)
        n = int(ts["retry"].sum())
        sl = pd.DataFrame({"time": np.sort(rng.uniform(0, n_bins * bin_width, n)),
                           "job": rng.integers(0, 1000, n), "attempt": rng.integers(0, 4, n),
                           "sleep": rng.choice([0.005, 0.3, 1.0, 2.0, 7.0, 12.0], n)})
        if arm is not None:
            ts.insert(0, "replication", 0)
            ts.insert(0, "arm", arm)
            sl.insert(0, "replication", 0)
            sl.insert(0, "arm", arm)
        frames.append(ts)
        sleeps.append(sl)
    pd.concat(frames).to_csv(directory / "timeseries.csv", index=False)
    pd.concat(sleeps).to_csv(directory / "sleeps.csv", index=False)
    if arms:
        write_arms(directory, {arm: {} for arm in arms})
    else:
        (directory / "summary.json").write_text(json.dumps({"scenario": "synthetic"}))
    return directory


def write_arms(directory: Path, settings: dict[str, dict], replications: int = 1) -> None:
    """A comparison's ``arms.json`` and ``runs.csv`` for arms *settings* (label -> settings)."""
    (directory / "arms.json").write_text(json.dumps({"replications": replications, "arms": [
        {"label": arm, "strategy": "fixed", "settings": s} for arm, s in settings.items()]}))
    pd.DataFrame([{"arm": arm, "replication": r} for arm in settings
                  for r in range(replications)]).to_csv(directory / "runs.csv", index=False)


def parse(text: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """Samples (name, labels dict, label key, value, timestamp text, ms as Prometheus reads
    it) and each family's type; asserts the line grammar and the family grouping rules."""
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    lines = text[:-1].split("\n")[:-1]
    assert all(lines), "blank line"
    types: dict[str, str] = {}
    rows, family, seen = [], None, set()
    for line in lines:
        if line.startswith("#"):
            kind, name = line.split(" ")[1:3]
            if name != family:
                assert name not in seen, f"family {name} is interleaved"
                seen.add(name)
                family = name
            if kind == "TYPE":
                types[name] = line.split(" ")[3]
            continue
        match = SAMPLE.match(line)
        assert match, line
        name, labels, value, stamp = match.groups()
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"],
                    "gauge": [""]}[types[family]]
        assert name in [family + suffix for suffix in suffixes], (family, line)
        rows.append({"family": family, "name": name, "labels": dict(LABEL.findall(labels)),
                     "value": float(value), "stamp": stamp,
                     "ms": math.trunc(float(stamp) * 1000)})  # Go: int64(ts * 1000)
    frame = pd.DataFrame(rows)
    frame["key"] = frame["name"] + frame["labels"].map(lambda d: str(sorted(d.items())))
    return frame, types


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")


@pytest.fixture
def exported(run_dir: Path) -> tuple[pd.DataFrame, dict[str, str], pd.DataFrame, pd.DataFrame]:
    prom.export(run_dir, start=START)
    samples, types = parse((run_dir / "metrics.om").read_text())
    return (samples, types, pd.read_csv(run_dir / "timeseries.csv"),
            pd.read_csv(run_dir / "sleeps.csv"))


def series(samples: pd.DataFrame, name: str, **labels: str) -> pd.Series:
    """One series' values indexed by ms, in file order."""
    mask = (samples["name"] == name) & samples["labels"].map(
        lambda d: all(d.get(k) == v for k, v in labels.items()))
    found = samples[mask]
    assert found["key"].nunique() == 1, (name, labels, found["key"].unique())
    return pd.Series(found["value"].to_numpy(), index=found["ms"].to_numpy())


def test_every_series_is_in_time_order_on_the_bin_grid(exported):
    """Out-of-order samples are dropped by the backfill: each series must strictly
    increase in time; timestamps are seconds (Prometheus reads ms = trunc(s * 1000))
    on the run's bin grid from the start anchor to the run's end."""
    samples, _, ts, _ = exported
    for _, group in samples.groupby("key", sort=False):
        assert np.all(np.diff(group["ms"].to_numpy()) > 0)
    offsets = samples["ms"] - START * 1000
    assert offsets.min() == 0 and offsets.max() == round(len(ts) * 0.1 * 1000)
    assert np.all(offsets % 100 == 0)


def test_counters_are_cumulative_and_end_at_the_column_totals(exported):
    """``rate()`` reads a decrease as a reset, so counters are running totals: 0 at the
    start, never decreasing, equal to the cumulative column sums at every bin edge.
    status=retry counts the retry column plus the recycled column."""
    samples, types, ts, _ = exported
    assert types["worker_job_execution"] == "counter"
    expected = {"success": ts["success"], "retry": ts["retry"] + ts["recycled"],
                "failed_dlq": ts["failed_dlq"]}
    for status, counts in expected.items():
        got = series(samples, "worker_job_execution_total", status=status, queue="orders")
        assert np.array_equal(got.to_numpy(), np.concatenate([[0], np.cumsum(counts)]))
    calls = series(samples, "downstream_calls_total")
    assert calls.iloc[-1] == ts["attempts"].sum()


def test_histogram_is_cumulative_with_inf_equal_to_count(exported):
    """At every timestamp: buckets grow with ``le``, ``+Inf`` equals ``_count``, and at the
    end each bucket counts the sleeps <= its bound, ``_sum`` their total."""
    samples, types, _, sleeps = exported
    assert types["worker_retry_sleep_duration_seconds"] == "histogram"
    buckets = samples[samples["name"] == "worker_retry_sleep_duration_seconds_bucket"]
    les = buckets["labels"].map(lambda d: d["le"])
    assert list(dict.fromkeys(les)) == [prom.format_le(b) for b in prom.DEFAULT_BUCKETS] + [
        "+Inf"]
    table = buckets.assign(le=les.map(float)).pivot(index="ms", columns="le", values="value")
    assert np.all(np.diff(table.to_numpy(), axis=1) >= 0)
    assert np.all(np.diff(table.to_numpy(), axis=0) >= 0)
    count = series(samples, "worker_retry_sleep_duration_seconds_count")
    assert np.array_equal(table[math.inf].to_numpy(), count.loc[table.index].to_numpy())
    final = table.iloc[-1]
    for bound in prom.DEFAULT_BUCKETS:
        assert final[bound] == (sleeps["sleep"] <= bound).sum()
    total = series(samples, "worker_retry_sleep_duration_seconds_sum").iloc[-1]
    assert total == pytest.approx(sleeps["sleep"].sum(), rel=1e-12)


def test_histogram_samples_count_sleeps_drawn_before_each_timestamp(exported):
    """A sleep drawn at time t is counted from the first sample after t (bin edge)."""
    samples, _, _, sleeps = exported
    count = series(samples, "worker_retry_sleep_duration_seconds_count")
    edges = (count.index - START * 1000) / 1000
    drawn = np.searchsorted(np.sort(sleeps["time"].to_numpy()), edges - 1e-9, side="right")
    assert np.array_equal(count.to_numpy(), drawn)


def test_gauges_are_the_columns_at_bin_start(exported):
    samples, types, ts, _ = exported
    for column, family in prom.GAUGES.items():
        assert types[family] == "gauge"
        got = series(samples, family)
        assert np.allclose(got.to_numpy(), ts[column].to_numpy())
        assert np.array_equal(got.index - START * 1000, np.round(ts["time"] * 1000))
    capacity = series(samples, "downstream_concurrency_limit")
    assert set(capacity) == {CONCURRENCY}


def test_a_run_without_breaker_column_has_no_breaker_gauge(tmp_path):
    directory = write_run(tmp_path / "old", breaker=False)
    samples, types = parse(prom.render(prom.load_run(directory), START)[0])
    assert "worker_circuit_breaker_open_ratio" not in types
    assert "worker_queue_depth" in types


def test_a_run_without_retries_has_an_all_zero_histogram(run_dir):
    pd.DataFrame(columns=["time", "job", "attempt", "sleep"]).to_csv(
        run_dir / "sleeps.csv", index=False)
    samples, _ = parse(prom.render(prom.load_run(run_dir), START)[0])
    histogram = samples[samples["family"] == "worker_retry_sleep_duration_seconds"]
    assert len(histogram) == 51 * (len(prom.DEFAULT_BUCKETS) + 3)
    assert (histogram["value"] == 0).all()


def test_compare_directory_labels_every_series_with_its_arm(tmp_path):
    """A comparison's tidy frames become one set of series per arm, told apart by ``arm``;
    each arm's counters end at that arm's own totals."""
    directory = write_run(tmp_path / "cmp", arms=("exponential", "full_jitter"))
    prom.export(directory, start=START)
    samples, _ = parse((directory / "metrics.om").read_text())
    assert set(samples["labels"].map(lambda d: d.get("arm"))) == {"exponential", "full_jitter"}
    ts = pd.read_csv(directory / "timeseries.csv")
    sleeps = pd.read_csv(directory / "sleeps.csv")
    for arm, frame in ts.groupby("arm"):
        retry = series(samples, "worker_job_execution_total", status="retry", arm=arm)
        assert retry.iloc[-1] == (frame["retry"] + frame["recycled"]).sum()
        count = series(samples, "worker_retry_sleep_duration_seconds_count", arm=arm)
        assert count.iloc[-1] == (sleeps["arm"] == arm).sum()


def test_compare_directory_exports_one_replication(tmp_path):
    """Several replications of an arm would be the same series twice: one is exported."""
    directory = write_run(tmp_path / "cmp", arms=("a",))
    ts = pd.read_csv(directory / "timeseries.csv")
    twice = pd.concat([ts, ts.assign(replication=1, retry=0, recycled=0)])
    twice.to_csv(directory / "timeseries.csv", index=False)
    write_arms(directory, {"a": {}}, replications=2)
    for replication, total in ((0, (ts["retry"] + ts["recycled"]).sum()), (1, 0)):
        samples, _ = parse(prom.render(prom.load_run(directory, replication), START)[0])
        assert series(samples, "worker_job_execution_total", status="retry").iloc[-1] == total
    with pytest.raises(herdsim.errors.UsageError, match="no such replication"):
        prom.load_run(directory, 2)


def test_arms_varying_concurrency_get_their_own_capacity(tmp_path):
    directory = write_run(tmp_path / "cmp", arms=("small", "big"))
    write_arms(directory, {"small": {"downstream.concurrency": 3},
                           "big": {"downstream.concurrency": 30}})
    samples, _ = parse(prom.render(prom.load_run(directory), START)[0])
    for arm, value in (("small", 3), ("big", 30)):
        assert set(series(samples, "downstream_concurrency_limit", arm=arm)) == {value}


def test_interval_samples_every_kth_bin_edge(run_dir):
    """``interval=1s`` on 100 ms bins keeps every 10th edge, plus the run's end."""
    samples, _ = parse(prom.render(prom.load_run(run_dir), START, interval=1.0)[0])
    ts = pd.read_csv(run_dir / "timeseries.csv")
    got = series(samples, "worker_job_execution_total", status="success")
    cumulative = np.concatenate([[0], np.cumsum(ts["success"])])
    assert list(got.index - START * 1000) == [0, 1000, 2000, 3000, 4000, 5000]
    assert np.array_equal(got.to_numpy(), cumulative[::10])
    with pytest.raises(herdsim.errors.UsageError, match="not a multiple of the run.s bin"):
        prom.render(prom.load_run(run_dir), START, interval=0.15)


def test_custom_buckets_and_their_le_strings(run_dir):
    samples, _ = parse(prom.render(prom.load_run(run_dir), START, buckets=[0.25, 1, 5])[0])
    les = samples.loc[samples["name"].str.endswith("_bucket"), "labels"].map(lambda d: d["le"])
    assert list(dict.fromkeys(les)) == ["0.25", "1.0", "5.0", "+Inf"]
    for bad in ([], [1, 0.5], [0.1, float("nan")]):
        with pytest.raises(herdsim.errors.UsageError, match="buckets"):
            prom.render(prom.load_run(run_dir), START, buckets=bad)


@pytest.mark.parametrize("bound, text", [
    (0.005, "0.005"), (0.1, "0.1"), (1, "1.0"), (2.5, "2.5"), (10, "10.0"), (120, "120.0"),
    (123456, "123456.0"), (1e6, "1e+06"), (0.0001, "0.0001"), (1e-05, "1e-05"),
    (1.5e-7, "1.5e-07"), (math.inf, "+Inf"),
])
def test_le_is_formatted_like_prometheus(bound, text):
    """Prometheus's formatOpenMetricsFloat: Go's ``%v`` (shortest digits, exponent form below
    1e-4 and from 1e6 on, two-digit exponent), ``.0`` appended when it reads as an integer."""
    assert prom.format_le(bound) == text


@given(st.integers(min_value=0, max_value=10**14 - 1))
def test_timestamps_read_back_as_the_same_millisecond(millis):
    """Prometheus truncates ``float(text) * 1000``; the text must not lose a millisecond,
    and must stay within a microsecond of the true time, or within two float steps where a
    double cannot hold a microsecond (past about 2^33 s, year 2242)."""
    text = str(prom.timestamps(np.array([millis]))[0])
    assert math.trunc(float(text) * 1000) == millis
    assert abs(float(text) - millis / 1000) <= max(1e-6, 2 * math.ulp(millis / 1000))


def test_start_in_milliseconds_is_refused(run_dir):
    """Timestamps in ms are accepted by promtool and land thousands of years ahead."""
    with pytest.raises(herdsim.errors.UsageError, match="looks like milliseconds"):
        prom.export(run_dir, start=START * 1000)


def test_default_start_puts_the_run_just_before_now(run_dir):
    """So that retention (15 days by default) does not delete the backfilled blocks."""
    import time

    before = time.time()
    result = prom.export(run_dir)
    assert before - 5 - 1 <= result.start <= time.time() - 5 and result.end <= time.time()


def test_label_values_are_escaped(tmp_path):
    directory = write_run(tmp_path / "q", queue='we"ird\\queue')
    samples, _ = parse(prom.render(prom.load_run(directory), START)[0])
    assert set(samples["labels"].map(lambda d: d["queue"])) == {r'we\"ird\\queue'}


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "timeseries.csv").unlink(), "timeseries.csv is missing"),
    (lambda d: (d / "sleeps.csv").unlink(), "sleeps.csv is missing"),
    (lambda d: pd.read_csv(d / "timeseries.csv").drop(columns="retry").to_csv(
        d / "timeseries.csv", index=False), "missing column"),
    (lambda d: (d / "scenario.yaml").write_text("name: [\n"), "YAML syntax error"),
])
def test_a_damaged_directory_is_a_clear_error(run_dir, damage, message):
    damage(run_dir)
    with pytest.raises(herdsim.HerdsimError, match=message):
        prom.export(run_dir, start=START)
    assert not (run_dir / "metrics.om").exists()


def test_cli_export_writes_the_file_and_errors_exit_2(run_dir, tmp_path):
    runner = CliRunner()
    done = runner.invoke(app, ["export", "prometheus", str(run_dir), "--start",
                               "2023-11-14T22:13:20Z", "--interval", "500ms"])
    assert done.exit_code == 0, done.output
    samples, _ = parse((run_dir / "metrics.om").read_text())
    assert samples["ms"].min() == START * 1000
    for args, message in (([str(tmp_path / "nowhere")], "does not exist"),
                          ([str(run_dir), "--start", "1700000000000"], "milliseconds"),
                          ([str(run_dir), "--buckets", "1,x"], "buckets")):
        done = runner.invoke(app, ["export", "prometheus", *args])
        assert done.exit_code == 2 and message in done.output
        assert "Traceback" not in done.output


@pytest.mark.slow
def test_run_with_prometheus_flag_writes_metrics(tmp_path, make_scenario):
    path = tmp_path / "tiny.yaml"
    path.write_text(load_scenario(make_scenario()).to_yaml())
    done = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out"),
                                    "--prometheus"])
    assert done.exit_code == 0, done.output
    samples, _ = parse((tmp_path / "out" / "metrics.om").read_text())
    ts = pd.read_csv(tmp_path / "out" / "timeseries.csv")
    got = series(samples, "worker_job_execution_total", status="success")
    assert got.iloc[-1] == ts["success"].sum()


@pytest.mark.slow
def test_the_openmetrics_export_labels_each_tier_with_service(tmp_path):
    """A graph's run: one ``service_calls_total`` series per tier, ending at the tier's
    calls; a single-tier run: no ``service`` label anywhere."""
    from herdsim.outputs import openmetrics

    data = graph(**{"services.db.outages": [{"start": "1s", "duration": "1s"}]})
    res = herdsim.run(herdsim.load_scenario(data))
    herdsim.save(res, tmp_path / "graph", formats=[])
    openmetrics.export(tmp_path / "graph", start=1.7e9)
    samples, _ = parse((tmp_path / "graph" / "metrics.om").read_text())
    for name, kpis in res.summary["tiers"].items():
        mine = samples[(samples["name"] == "service_calls_total")
                       & samples["labels"].map(lambda d, n=name: d.get("service") == n)]
        assert mine["value"].iloc[-1] == kpis["calls"]
        ok = samples[(samples["name"] == "service_call_results_total") & samples["labels"].map(
            lambda d, n=name: d.get("service") == n and d.get("status") == "success")]
        assert ok["value"].iloc[-1] == kpis["succeeded_calls"]
    plain = herdsim.run(herdsim.load_scenario("scenarios/retries.yaml"))
    herdsim.save(plain, tmp_path / "plain", formats=[])
    openmetrics.export(tmp_path / "plain", start=1.7e9)
    assert "service=" not in (tmp_path / "plain" / "metrics.om").read_text()

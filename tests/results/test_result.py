"""Python for notebook users (issue 11, item 6): short and HTML reprs with units from the
registry, per-second rates from the time series, a tidy long-form comparison summary with
whole counts and no NaN/None shown. Budget: about 3 s (tiny runs)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import herdsim
from herdsim.analysis.kpis import BY_KEY


@pytest.fixture(scope="module")
def result(make_scenario):
    return herdsim.run(herdsim.load_scenario(make_scenario(
        duration="3s", downstream={"outages": [{"start": "1s", "duration": "500ms"}]})))


@pytest.fixture(scope="module")
def comparison(make_scenario):
    sc = herdsim.load_scenario(make_scenario(
        downstream={"outages": [{"start": "500ms", "duration": "300ms"}]}))
    return herdsim.compare(sc, ["fixed", "full_jitter"], processes=1, progress=False)


def test_result_repr_is_one_short_line_with_the_verdict(result):
    text = repr(result)
    assert len(text) < 200 and "\n" not in text
    assert result.summary["state"] in text and "goodput" in text


def test_result_html_shows_every_value_with_its_unit_and_no_none(result):
    html = result._repr_html_()
    for word in ("None", "nan", "NaN"):
        assert word not in html
    assert BY_KEY["amplification"].unit in html and "calls/s" in html
    assert f"{result.summary['jobs_submitted']:,}" in html  # counts as whole numbers


def test_rates_are_the_counters_per_second(result):
    """Per bin: counts / bin; over a trailing window of k bins: the last k bins' counts
    over k x bin (computed here by convolution); gauges are left out."""
    sc, ts = result.scenario, result.timeseries
    per_bin = result.rates()
    assert set(per_bin.columns) >= {"time", "success", "retry", "attempts"}
    assert "queue_depth" not in per_bin and "downstream_up" not in per_bin
    assert np.allclose(per_bin["success"] * sc.bin, ts["success"])
    assert per_bin["success"].sum() * sc.bin == pytest.approx(result.summary["jobs_succeeded"])
    k = 5  # "500ms" of 100 ms bins
    trailing = result.rates("500ms")
    expected = np.convolve(ts["retry"].to_numpy(), np.ones(k))[: len(ts)] / (k * sc.bin)
    assert np.allclose(trailing["retry"], expected)


def test_tidy_is_one_row_per_arm_and_kpi_with_plain_values(comparison):
    tidy = comparison.tidy()
    assert set(tidy.columns) >= {"arm", "rank", "kpi", "label", "unit", "value", "ci95",
                                 "shown", "better"}
    assert len(tidy) == len(comparison.arms) * tidy["kpi"].nunique()
    for _, row in tidy.iterrows():
        value = row["value"]
        assert value is None or not (isinstance(value, float) and math.isnan(value))
        if BY_KEY[row["kpi"]].kind == "count" and value is not None:
            assert isinstance(value, int), row["kpi"]
        assert row["shown"] and "nan" not in row["shown"] and "None" not in row["shown"]
    assert tidy["ci95"].isna().all()  # one replication: no interval


def test_comparison_summary_keeps_counts_whole_and_has_no_empty_intervals(comparison):
    summary = comparison.summary
    assert str(summary["jobs_succeeded"].dtype) == "Int64"
    assert not [c for c in summary.columns if c.endswith("_ci95")]
    assert set(summary["state"]) <= {"recovered", "degraded", "metastable"}


def test_comparison_reprs(comparison):
    assert len(repr(comparison)) < 200 and "best:" in repr(comparison)
    html = comparison._repr_html_()
    assert "one replication" in html and "ranked by state" in html
    for word in ("None", "nan", "NaN"):
        assert word not in html

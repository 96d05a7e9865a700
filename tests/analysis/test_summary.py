"""One censoring rule: latency quantiles as order statistics with exact lower and upper
bounds (pending jobs at their age, or never finishing), shown the same on every surface.

The truth is numpy's own inverted-CDF quantile of latencies that complete the pending jobs
in any way consistent with their ages.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herdsim.analysis.kpis import BOUNDS_NOTE, show
from herdsim.analysis.summary import QUANTILES, latency_quantiles
from herdsim.model.recorder import OUTCOMES

END = 100.0


def jobs(finished: list[float], ages: list[float]) -> pd.DataFrame:
    """Finished jobs with these latencies, pending ones with these ages at END."""
    n_f = len(finished)
    arrival = np.r_[np.zeros(n_f), END - np.asarray(ages, dtype=float)]
    latency = np.r_[np.asarray(finished, dtype=float), np.full(len(ages), np.nan)]
    codes = np.r_[np.zeros(n_f, dtype=np.int8), np.full(len(ages), 2, dtype=np.int8)]
    return pd.DataFrame({"arrival": arrival, "latency": latency,
                         "outcome": pd.Categorical.from_codes(codes, OUTCOMES)})


@settings(max_examples=80, deadline=None)
@given(finished=st.lists(st.floats(0, 50), max_size=60),
       ages=st.lists(st.floats(0, 50), max_size=60),
       extra=st.lists(st.floats(0, 1e6), min_size=60, max_size=60))
def test_the_true_quantile_lies_between_the_bounds(finished, ages, extra):
    """Whatever the pending jobs' true latencies (at least their ages), numpy's inverted-CDF
    quantile of the completed run lies in [latency_pXX, latency_pXX_upper]; the lower
    bound is that quantile with pending jobs at their ages; the upper is finite exactly
    while the pending share is below 1 - q."""
    if not finished and not ages:
        return
    out = latency_quantiles(jobs(finished, ages), END)
    truth_values = np.r_[finished, np.asarray(ages) + np.asarray(extra[:len(ages)])]
    at_ages = np.r_[finished, ages]
    n = len(at_ages)
    for key, q in QUANTILES.items():
        lower, upper = out[key], out[f"{key}_upper"]
        assert lower == pytest.approx(np.quantile(at_ages, q, method="inverted_cdf"))
        truth = np.quantile(truth_values, q, method="inverted_cdf")
        assert lower - 1e-9 <= truth <= (np.inf if upper is None else upper + 1e-9)
        assert (upper is None) == (len(ages) / n > 1 - q + 1e-12)


def test_the_outage_case_of_the_issue_reads_as_a_range():
    """A pending job younger than the p99 leaves it between two values ('lo–hi'), not the
    bare number the CLI used to print; all pending older than every finished job and fewer
    than 1% of jobs: exact; half or more pending: '≥' on the median."""
    finished = list(np.linspace(0.01, 5.0, 990))
    young = latency_quantiles(jobs(finished, [0.5] * 10), END)
    assert "–" in show("latency_p99", young["latency_p99"], young)
    old = latency_quantiles(jobs(finished, [60.0] * 5), END)
    assert old["latency_p50"] == old["latency_p50_upper"]
    assert show("latency_p50", old["latency_p50"], old) == f"{old['latency_p50']:.3g}"
    stuck = latency_quantiles(jobs(finished[:10], [60.0] * 20), END)
    assert stuck["latency_p50_upper"] is None and stuck["latency_censored"]
    assert show("latency_p50", stuck["latency_p50"], stuck) == "≥ 60"
    assert "≥" in BOUNDS_NOTE and "–" in BOUNDS_NOTE


def test_bounds_apart_only_past_the_digits_shown_print_one_number():
    """A range printed '0.203–0.203' says nothing the number does not: bounds that print
    alike print once; bounds that print apart keep the range."""
    close = {"latency_p99": 0.20301, "latency_p99_upper": 0.20304, "latency_censored": True}
    assert show("latency_p99", close["latency_p99"], close) == "0.203"
    apart = {**close, "latency_p99_upper": 0.2051}
    assert show("latency_p99", apart["latency_p99"], apart) == "0.203–0.205"


def test_latency_of_successes_is_its_own_number():
    """``latency_succeeded_pXX`` reads the succeeded jobs alone: dead-lettered jobs with
    short latencies must not make a run that mostly fails look fast."""
    codes = np.r_[np.zeros(10, dtype=np.int8), np.ones(90, dtype=np.int8)]
    frame = pd.DataFrame({"arrival": np.zeros(100),
                          "latency": np.r_[np.full(10, 30.0), np.full(90, 0.1)],
                          "outcome": pd.Categorical.from_codes(codes, OUTCOMES)})
    out = latency_quantiles(frame, END)
    assert out["latency_p50"] == pytest.approx(0.1)
    assert out["latency_succeeded_p50"] == pytest.approx(30.0)


def test_every_surface_shows_the_same_text(make_scenario):
    """The CLI's ranked table, the KPI figure's labels and the report's table print the
    p99 of a run with pending jobs in the same words (the registry's ``show``)."""
    from herdsim import load_scenario, run
    from herdsim.outputs.report.page import render
    from herdsim.results.comparison import Comparison

    result = run(load_scenario(make_scenario(workload={"rate": 300},
                                             downstream={"concurrency": 2})))
    c = Comparison.from_result(result)
    s = result.summary
    text = show("latency_p99", s["latency_p99"], s)
    assert s["jobs_pending"] > 0 and text != f"{s['latency_p99']:.3g}"
    assert c.table()["p99 s"].iloc[0] == text
    figure = c.plot("kpis")
    labels = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert text in labels
    assert f"<td>{text}</td>" in render(c, kinds=())

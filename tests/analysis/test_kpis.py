"""The KPIs that say whose, over what, and when they are only bounds (issue 11, item 1).

Each test pins one rule of docs/model.md ("What the summary measures") against an
invariant, an independent computation or the sweep's own classifier. Budget: about 8 s
(tiny runs, the bundled retries and aws-2015 scenarios, metastable.yaml cut to 30 s twice).
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from conftest import tiny
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from herdsim import load_scenario, run
from herdsim.analysis import metastability
from herdsim.analysis.kpis import STATES, on, show
from herdsim.analysis.summary import offered_rate
from herdsim.cli.tables import summary_table
from herdsim.results.comparison import rank

OUTAGE = {"outages": [{"start": "1s", "duration": "500ms", "mode": "down"}]}


def with_outage(**changes) -> dict:
    return tiny(duration="4s", downstream=OUTAGE, **changes)


@pytest.fixture(scope="module")
def outage_run():
    return run(load_scenario(with_outage()))


@given(seed=st.integers(0, 10_000), rate=st.sampled_from([20, 80, 200]),
       retries=st.sampled_from([0, 2, None]))
@settings(max_examples=12, deadline=None)
def test_counts_add_up_and_amplification_is_per_success(seed, rate, retries):
    """succeeded_fraction x submitted == succeeded; amplification x succeeded == calls, so
    it is at least 1 (every success is a call) and exactly 1 when nothing ever failed."""
    s = run(load_scenario(with_outage(seed=seed, workload={"rate": rate},
                                      retry={"max_retries": retries}))).summary
    assert round(s["succeeded_fraction"] * s["jobs_submitted"]) == s["jobs_succeeded"]
    assert isinstance(s["jobs_succeeded"], int) and isinstance(s["jobs_pending"], int)
    if s["jobs_succeeded"]:
        assert s["amplification"] * s["jobs_succeeded"] == pytest.approx(s["attempts_total"])
        assert s["amplification"] >= 1
        if s["retries_total"] == 0 and s["rejected_total"] == 0 and s["jobs_pending"] == 0:
            assert s["amplification"] == 1
    else:
        assert s["amplification"] is None


def test_no_success_means_no_amplification_and_the_table_says_why(make_scenario):
    """A downstream down for the whole run: nothing succeeds, amplification is n/a."""
    s = run(load_scenario(make_scenario(
        downstream={"outages": [{"start": "0s", "duration": "2s"}]}))).summary
    assert s["jobs_succeeded"] == 0 and s["amplification"] is None
    assert show("amplification", None, s) == "n/a (no job succeeded)"


def test_goodput_is_successes_after_the_outage_over_the_offered_rate(outage_run):
    """By definition, from the jobs frame; near 1 for a run that drains its small backlog
    (Poisson at 50/s over 2.5 s: 125 jobs, sd ~ 11, so 1 +- 0.35 is > 3 sd)."""
    sc, jobs, s = outage_run.scenario, outage_run.jobs, outage_run.summary
    end = max(e for _, e in sc.outage_windows)
    done = ((jobs["outcome"] == "succeeded") & (jobs["finish"] >= end)).sum()
    assert s["goodput"] == pytest.approx(done / (sc.duration - end) / sc.workload.rate)
    assert abs(s["goodput"] - 1) < 0.35


def test_goodput_without_an_outage_is_over_the_whole_run_with_spikes_and_poison(make_scenario):
    """The offered rate integrates the spikes' rates and leaves the poison out."""
    sc = load_scenario(make_scenario(workload={
        "rate": 40, "poison_fraction": 0.25, "spikes": [{"at": "1s", "duration": "500ms",
                                                         "rate": 80}]}))
    assert offered_rate(sc, 0, 2) == pytest.approx((40 * 1.5 + 80 * 0.5) / 2 * 0.75)
    r = run(sc)
    done = (r.jobs["outcome"] == "succeeded").sum()
    assert r.summary["goodput"] == pytest.approx(done / 2 / offered_rate(sc, 0, 2))


def test_latency_quantiles_are_lower_bounds_of_the_longer_run(make_scenario):
    """The same run continued (same seed, longer duration: the same trajectory up to the
    cut) finishes jobs that were pending at the cut; every job's latency is then at least
    the value the cut run used (its age), so every quantile can only rise. A downstream too
    slow for the load keeps jobs pending, so the cut run is censored."""
    base = dict(workload={"rate": 300}, downstream={"concurrency": 2})
    short = run(load_scenario(make_scenario(**base)))
    long = run(load_scenario(make_scenario(duration="6s", **base)))
    s = short.summary
    assert s["jobs_pending"] > 0 and s["latency_censored"]
    assert s["pending_age_max"] >= s["latency_p50"]
    cut = long.jobs[long.jobs["arrival"] < 2.0]
    assert cut["job"].tolist() == short.jobs["job"].tolist()  # the same jobs
    values = cut["latency"].fillna(6.0 - cut["arrival"]).to_numpy()
    for q, key in ((0.5, "latency_p50"), (0.99, "latency_p99")):
        # the same order statistic (numpy's inverted CDF) of the longer run's latencies
        truth = np.quantile(values, q, method="inverted_cdf")
        upper = np.inf if s[f"{key}_upper"] is None else s[f"{key}_upper"]
        assert s[key] - 1e-12 <= truth <= upper + 1e-12
    shown = show("latency_p99", s["latency_p99"], s)  # a bound or a range, never bare
    assert shown.startswith("≥ ") or "–" in shown or s["latency_p99_upper"] == s["latency_p99"]


def test_latency_is_exact_when_nothing_is_pending(make_scenario):
    s = run(load_scenario(make_scenario(duration="3s", workload={"rate": 5}))).summary
    if s["jobs_pending"] == 0:
        assert not s["latency_censored"] and s["pending_age_max"] is None
        assert not show("latency_p99", s["latency_p99"], s).startswith("≥")


def test_peak_to_baseline_is_the_outage_peak_over_the_peak_before(outage_run):
    """Brute force over every window anchored at a call, before and from the outage."""
    sc, times = outage_run.scenario, outage_run.attempt_times
    w, first = sc.peak_window, sc.outage_windows[0][0]

    def brute(ts):
        return max(((ts >= t) & (ts < t + w)).sum() for t in ts) / w

    before = times[times <= first - w]
    assert outage_run.summary["peak_to_baseline"] == pytest.approx(
        brute(times[times >= first]) / brute(before))


def test_no_outage_no_baseline_and_unbounded_capacity_is_na(scenarios_dir):
    """retries.yaml: an outage from t = 0 (no pre-outage period) and 10^8 calls/s of
    capacity against 1,000 offered: capacity, peak/capacity and peak/baseline are n/a."""
    s = run(load_scenario(scenarios_dir / "retries.yaml")).summary
    assert s["capacity_rate"] is None and s["peak_to_capacity"] is None
    assert s["peak_to_baseline"] is None
    assert show("capacity_rate", None, s) == "n/a (unbounded)"


def test_occ_shows_conflicts_and_completion_not_rejections(scenarios_dir):
    """aws-2015: every client writes once successfully; each other write is a conflict."""
    s = run(load_scenario(scenarios_dir / "aws-2015.yaml",
                          {"workers.count": 20})).summary
    assert s["rejected_total"] is None and s["capacity_rate"] is None
    assert s["conflicts"] == s["attempts_total"] - s["jobs_succeeded"]
    assert s["completion_time"] is not None and s["state"] == "recovered"
    assert s["goodput"] is None  # no offered rate
    text = render(s)
    assert "conflicts" in text and "completion time" in text
    assert "rejected at once" not in text


def render(summary: dict) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=120).print(summary_table(summary, "t"))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def metastable_pair(scenarios_dir):
    """metastable.yaml cut to 30 s (the trap is sprung by 12 s), with and without the
    AWS retry quota that its comments say cures it."""
    path = scenarios_dir / "metastable.yaml"
    plain = run(load_scenario(path, {"duration": "30s"}))
    cured = run(load_scenario(path, {"duration": "30s", "budget.kind": "token_bucket",
                                     "budget.preset": "aws"}))
    return plain, cured


@pytest.mark.slow
def test_state_is_the_sweeps_classifier(metastable_pair):
    """The summary's state is what the sweep's classifier says of the same run's row."""
    for result in metastable_pair:
        row = {**result.summary, **metastability.run_kpis(result)}
        assert result.summary["state"] == metastability.classify(pd.DataFrame([row])).iloc[0]
    plain, cured = metastable_pair
    assert plain.summary["state"] == "metastable" and cured.summary["state"] == "recovered"
    assert plain.summary["goodput"] < 0.5 < cured.summary["goodput"]


def test_tables_never_show_none_nan_or_never(metastable_pair, outage_run, make_scenario):
    """Every KPI of the run table is shown, undefined ones as n/a or 'not recovered within
    the run'; state and the success figures come first."""
    quiet = run(load_scenario(make_scenario())).summary  # no outage at all
    for summary in (metastable_pair[0].summary, outage_run.summary, quiet):
        text = render(summary)
        for word in ("None", "nan", "NaN", "never", "—"):
            assert word not in text, word
        rows = [line for line in text.splitlines() if line.startswith("│")]
        assert [r.split("│")[1].strip() for r in rows[:3]] == [
            kpi.label for kpi in on("run")[:3]]
    assert "not recovered within the run" in render(metastable_pair[0].summary)
    assert "n/a (no outage)" in render(quiet)


@pytest.mark.slow
@given(st.lists(st.tuples(st.sampled_from(STATES), st.none() | st.floats(0, 100),
                          st.floats(0, 2)), min_size=1, max_size=8))
def test_ranking_puts_every_recovered_arm_before_any_stuck_one(rows):
    """For any arms: states in order, and inside a state recovery time rises (undefined
    last), whatever the peaks and goodputs say."""
    summary = pd.DataFrame([{"arm": str(i), "state": s, "recovery_time": r, "goodput": g,
                             "peak_to_capacity": 1.0} for i, (s, r, g) in enumerate(rows)])
    ranked = rank(summary)
    order = ranked["state"].map(STATES.index).to_numpy()
    assert (np.diff(order) >= 0).all()
    for _, group in ranked.groupby("state"):
        recovery = group["recovery_time"].to_numpy(dtype=float)
        defined = recovery[~np.isnan(recovery)]
        assert (np.diff(defined) >= 0).all()
        assert not np.isnan(recovery[: len(defined)]).any()  # undefined ones last

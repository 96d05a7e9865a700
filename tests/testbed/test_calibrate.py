"""The per-attempt turnaround from the workers' logs: its components on the one clock,
calls that never reached the server left out, a dilated run's times divided back, and
the lognormal fit recovering a lognormal's mean and spread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herdsim.config.loading import load_scenario
from herdsim.testbed import calibrate

BUNDLED = Path(__file__).parents[2] / "herdsim" / "scenarios" / "testbed.yaml"


def log(due, start, arrive, leave, end, retry) -> dict[str, np.ndarray]:
    return {f"turnaround.{name}": np.asarray(values, dtype=float) for name, values in
            zip(("due", "start", "arrive", "leave", "end", "retry"),
                (due, start, arrive, leave, end, retry), strict=True)}


def test_the_turnaround_is_everything_but_the_handlers_own_time():
    """An attempt due at 1.0, sent at 1.002, handled from 1.003 to 1.203, read at 1.205:
    2 ms waking, 1 ms out, 2 ms back, 5 ms in all; one never served is left out; two
    processes' logs together; a run 2x dilated reports half of each."""
    a = log([1.0, 2.0], [1.002, 2.001], [1.003, np.nan], [1.203, np.nan], [1.205, 2.5],
            [1, 0])
    b = log([3.0], [3.0], [3.001], [3.101], [3.102], [0])
    frame = calibrate.attempts([a, b])
    assert len(frame) == 2
    np.testing.assert_allclose(frame[["wake", "out", "back", "turnaround"]].to_numpy(),
                               [[0.002, 0.001, 0.002, 0.005], [0.0, 0.001, 0.001, 0.002]],
                               atol=1e-12)
    assert frame["retry"].tolist() == [True, False]
    half = calibrate.attempts([a, b], k=2.0)
    np.testing.assert_allclose(half["turnaround"], frame["turnaround"] / 2)
    rows = calibrate.summary(frame).set_index(["attempts", "component"])
    assert rows.loc[("retries", "turnaround"), "n"] == 1
    assert rows.loc[("all", "turnaround"), "mean_ms"] == pytest.approx(3.5)


@pytest.mark.parametrize(("mean", "sigma"), [(0.002, 0.5), (0.0015, 1.0)])
def test_the_fit_recovers_a_lognormals_mean_and_sigma(mean, sigma):
    """20,000 draws: the sample mean within 3% (a relative standard error of about
    0.8% at sigma 1) and the log-sd within 3%."""
    rng = np.random.default_rng(4)
    values = rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, 20_000)
    fitted = calibrate.fit(values)
    assert fitted["distribution"] == "lognormal"
    assert float(fitted["mean"].removesuffix("ms")) / 1e3 == pytest.approx(mean, rel=0.03)
    assert fitted["sigma"] == pytest.approx(sigma, rel=0.03)
    assert calibrate.fit(np.array([0.0, 0.001])) is None


@settings(max_examples=40, deadline=None)
@given(mean=st.floats(1e-6, 30.0), sigma=st.floats(0.0, 3.0), n=st.integers(2, 500),
       seed=st.integers(0, 2**32 - 1))
def test_the_printed_snippet_pasted_into_a_scenario_validates_as_the_fit(
        tmp_path_factory, mean, sigma, n, seed):
    """Any sample (from a microsecond to 30 s, identical values included): the snippet's
    line pasted under ``workers:`` of testbed.yaml loads, and the scenario's overhead is
    a lognormal of the sample's mean (to the 3 digits printed) and its log-sd (to the 3
    decimals printed, or the smallest sigma the scenario takes)."""
    values = np.random.default_rng(seed).lognormal(np.log(mean), sigma, n)
    fitted = calibrate.fit(values)
    lines = calibrate.snippet(fitted, n).splitlines()
    assert lines[0].startswith("#") and lines[1] == "workers:"
    text = BUNDLED.read_text().replace("workers:\n", "workers:\n" + lines[2] + "\n", 1)
    path = tmp_path_factory.mktemp("pasted") / "pasted.yaml"
    path.write_text(text)
    overhead = load_scenario(path).workers.attempt_overhead
    assert overhead.distribution == "lognormal"
    assert overhead.mean == pytest.approx(values.mean(), rel=5e-3)
    log_sd = float(np.log(values).std(ddof=1))
    assert overhead.sigma == pytest.approx(max(log_sd, calibrate.MIN_SIGMA), abs=1e-3)


def test_measured_is_the_valid_runs_attempts_or_every_runs_when_none_was_valid():
    frame = pd.DataFrame({"turnaround": [1.0, 2.0, 3.0], "valid": [True, False, True]})
    assert calibrate.measured(frame)["turnaround"].tolist() == [1.0, 3.0]
    none = frame.assign(valid=False)
    assert calibrate.measured(none)["turnaround"].tolist() == [1.0, 2.0, 3.0]


def test_given_sets_the_fit_as_the_overhead_and_changes_nothing_else():
    """The fitted overhead, as the scenario reads it; every other field as it was."""
    sc = load_scenario(BUNDLED)
    fitted = calibrate.fit(np.random.default_rng(3).lognormal(np.log(0.002), 0.8, 400))
    out = calibrate.given(sc, fitted)
    overhead = out.workers.attempt_overhead
    assert (overhead.distribution, overhead.sigma) == ("lognormal", fitted["sigma"])
    assert f"{overhead.mean * 1e3:.3g}ms" == fitted["mean"]
    a, b = out.to_dict(), sc.to_dict()
    del a["workers"]["attempt_overhead"]
    b["workers"].pop("attempt_overhead", None)
    assert a == b

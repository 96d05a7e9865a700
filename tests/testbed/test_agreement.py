"""The checks of the testbed's agreement: tolerances from the real runs' own spread,
invalid runs never counted, and ``herdsim testbed`` exiting 1 when too few runs are valid
or a check disagrees."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from herdsim.cli.app import app
from herdsim.config.loading import load_scenario
from herdsim.testbed import agreement
from herdsim.testbed import run as testbed_run
from herdsim.testbed.run import Testbed


def fake(sc, retries: float, peak_times: list[float], recovery: float | None,
         state: str = "recovered", failed: int = 0, is_valid: bool = True):
    """A run as the checks read it: its summary, scenario and attempt times."""
    return SimpleNamespace(scenario=sc, attempt_times=np.asarray(peak_times), summary={
        "retries_total": retries, "recovery_time": recovery, "state": state,
        "jobs_dead_lettered": failed, "jobs_pending": 0, "testbed_valid": is_valid})


@pytest.fixture(scope="module")
def sc():
    return load_scenario(Path(__file__).parents[2] / "scenarios" / "testbed.yaml")


@given(st.lists(st.floats(0, 1e4), min_size=3, max_size=8), st.floats(-1e4, 1e4))
def test_a_check_passes_exactly_within_k_sd_of_the_real_runs(real, sim):
    """The tolerance is K sample sd of the real values (at least the resolution), the
    simulation's mean against the real mean."""
    row = agreement.spread_check([sim], real, resolution=1.0)
    sd = float(np.std(real, ddof=1))
    tolerance = max(agreement.K * sd, 1.0)
    assert row["tolerance"] == pytest.approx(tolerance)
    assert row["agrees"] == (abs(sim - float(np.mean(real))) <= row["tolerance"])


def test_fewer_than_three_real_values_are_not_judged():
    assert agreement.spread_check([1.0], [1.0, 1.0], 1.0)["agrees"] is None
    assert agreement.spread_check([1.0], [1.0, 1.0, 1.0], 1.0)["agrees"] is True


def test_a_simulation_off_by_more_than_the_noise_fails_and_within_it_passes(sc):
    """Real retries 1000 ± 20 over five seeds: a simulation at 1030 lies within 2 sd
    (about 32), one at 1100 does not."""
    real_retries = [980, 1000, 1020, 990, 1010]
    reals = [fake(sc, r, [], 1.0) for r in real_retries]
    for sim_value, agrees in ((1030, True), (1100, False)):
        sims = [fake(sc, sim_value, [], 1.0) for _ in reals]
        rows = agreement.checks(sims, reals).set_index("check")
        assert bool(rows.loc["retries_total", "agrees"]) is agrees
        assert rows.loc["retries_total", "tolerance"] == pytest.approx(
            2 * np.std(real_retries, ddof=1))


def test_invalid_runs_are_not_counted(sc):
    """Three valid runs agree with the simulation; two invalid ones, far off, change
    neither the means, the spread nor the verdict (counted, they would move both)."""
    valid = [fake(sc, r, [], 1.0) for r in (1000, 1010, 990)]
    wild = [fake(sc, 5000, [], 9.0, state="collapsed", failed=300, is_valid=False)
            for _ in range(2)]
    sims = [fake(sc, 1005, [], 1.0) for _ in range(5)]
    rows = agreement.checks(sims, valid + wild).set_index("check")
    alone = agreement.checks(sims[:3], valid).set_index("check")
    pd.testing.assert_frame_equal(rows, alone)
    assert rows["agrees"].all()
    assert (rows["runs"] == 3).all()
    counted = [fake(sc, 5000, [], 9.0, state="collapsed", failed=300) for _ in range(2)]
    mixed = agreement.checks(sims, valid + counted).set_index("check")
    assert mixed.loc["retries_total", "real"] == pytest.approx((3000 + 10000) / 5)


def test_the_peak_is_the_busiest_window_after_the_outage_and_recovery_state_can_fail(sc):
    """Attempts before the outage's end do not count for the peak; a simulation that
    never recovers fails recovery_time against real runs that did."""
    end = max(e for _, e in sc.outage_windows)
    burst = [end + 0.001 * i for i in range(50)] + [end + 1.0]
    assert agreement.peak_after_outage(fake(sc, 0, [end - 0.05] * 99 + burst, 1.0)) == 500
    reals = [fake(sc, 10, [], 1.0) for _ in range(3)]
    sims = [fake(sc, 10, [], None, state="degraded") for _ in range(3)]
    rows = agreement.checks(sims, reals).set_index("check")
    assert not rows.loc["recovery_time", "agrees"]
    assert not rows.loc["state", "agrees"]


def _done(sc, valid: list[bool], agrees: bool | None) -> Testbed:
    runs = pd.DataFrame({"seed": range(len(valid)), "valid": valid,
                         "lateness_p99_ms": 1.0, "invalid_reason": None,
                         "recovery_time_real": np.nan})  # not recovered: null in --json
    table = pd.DataFrame({"kpi": ["retries_total"], "label": ["check"], "unit": [""],
                          "simulated": [1.0], "real": [1.0], "agrees": [agrees]})
    return Testbed(None, None, table, None, runs,  # type: ignore[arg-type]
                   sum(valid) >= min(agreement.MIN_VALID, len(valid)))


@pytest.mark.parametrize(("valid", "agrees", "code"), [
    ([True, True, True, False, False], True, 0),
    ([True, True, False, False, False], None, 1),
    ([True] * 5, False, 1)])
def test_the_command_exits_1_with_too_few_valid_runs_or_a_disagreement(
        sc, monkeypatch, tmp_path, valid, agrees, code):
    done = _done(sc, valid, agrees)
    assert done.agrees == (code == 0)
    calls = []

    def stand_in(scenario, out, *args, **kwargs):
        calls.append(kwargs)
        done.real = SimpleNamespace(summary={"x": 1})
        return done

    monkeypatch.setattr(testbed_run, "testbed", stand_in)
    result = CliRunner().invoke(app, ["testbed", "testbed", "--json", "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == code, result.output
    assert calls[0]["runs"] == 5 and calls[0]["dilate"] == 1.0
    said = json.loads(result.output)
    assert said["testbed_judged"] == done.judged and said["testbed_agrees"] == (code == 0)
    assert said["testbed_runs"][0]["recovery_time_real"] is None


@pytest.mark.parametrize(("sim", "real", "agrees"), [
    (["recovered"] * 3, ["degraded"] * 3, False),  # never the other side's state
    (["metastable"] * 3 + ["degraded"] * 2, ["degraded"] * 3 + ["metastable"] * 2, True),
    (["recovered"] * 5, ["degraded"] * 4 + ["recovered"], False),  # real's mode unseen
    (["degraded"] * 5, ["degraded"] * 4 + ["recovered"], True),
    (["recovered"] * 4 + ["degraded"], ["degraded"] * 3, False),  # sim's mode unseen
])
def test_the_state_agrees_when_each_sides_most_common_state_is_one_the_other_reaches(
        sim, real, agrees):
    """The breadth table's breaker arm split 3 to 2 between metastable and degraded on
    both sides, in opposite majorities: the same spread, not a disagreement. A state one
    side never ends in, being the other's most common, is one."""
    row = agreement.state_check(sim, real)
    sim_modes = {s for s in sim if sim.count(s) == max(map(sim.count, sim))}
    real_modes = {s for s in real if real.count(s) == max(map(real.count, real))}
    assert agrees == (bool(sim_modes & set(real)) and bool(real_modes & set(sim)))
    assert row["agrees"] is agrees
    assert row["simulated"] in sim_modes and row["real"] in real_modes
    assert agreement.state_check(sim, real[:2])["agrees"] is None  # too few real runs

"""herdsim against Metafor's CTMC for its README example, each side measuring what the CTMC
measures: the jobs in the system (waiting and in service, live or abandoned; at most 99)
as a share of time, and the time for a full queue to drain (benchmarks/metafor_ctmc.py;
the CTMC's numbers, regenerated with Metafor's own code: metafor_ctmc.json names the
commit and the command)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student

from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.experiments import metafor
from herdsim.results.predicted import predict

REFERENCE = json.loads((Path(__file__).parent / "metafor_ctmc.json").read_text())
ROOM = 98  # the CTMC's qsize 100: states n = 0..99, one of them in service
SEEDS = range(5)
HORIZON, WARM = 4000.0, 100.0


def variant(change: str) -> dict:
    """The CTMC's numbers with one approximation removed (the json's ``variants``)."""
    return next(v for v in REFERENCE["variants"] if v["change"].startswith(change))


def interval(values: list[float]) -> tuple[float, float]:
    """The 95% t interval of the mean of *values* (one per seed)."""
    v = np.asarray(values, dtype=float)
    half = student.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return v.mean() - half, v.mean() + half


def test_the_reference_says_where_it_comes_from_and_is_a_distribution():
    assert REFERENCE["commit"] == "5355c17f625fc5c1b2982c00706168eb8381b7f1"
    assert "benchmarks/metafor_ctmc.py --metafor" in REFERENCE["command"]
    for numbers in (REFERENCE, *REFERENCE["variants"]):
        assert 0 <= numbers["mean_queue"] <= ROOM + 1  # its queue's states: 0..qsize - 1
        assert 0 < numbers["p_full"] < 1
        assert numbers["p_full"] * (ROOM + 1) <= numbers["mean_queue"]  # Markov's bound


def test_the_ctmcs_own_solve_and_the_sparse_one_agree():
    """The as-is chain solved both ways (its dense null space, a sparse LU)."""
    sparse = REFERENCE["variants"][0]
    assert sparse["change"].startswith("none")
    for key in ("mean_queue", "p_full", "retry_orbit_mean"):
        assert sparse[key] == pytest.approx(REFERENCE[key], rel=1e-9)
    # the hitting time and the chance to drain by the horizon say the same: t / E[T]
    horizon = REFERENCE["drain_horizon_s"]
    assert sparse["p_drained_by_horizon"] == pytest.approx(
        horizon / REFERENCE["time_to_drain"], rel=0.5)


def test_the_fluid_model_is_bistable_and_started_full_holds_the_room_full():
    """Started full (99 calls), the fluid's room stays at its limit: every 1 s bin after
    the warm-up refuses calls (a step that refuses has its room full) and the system
    never empties (the CTMC: practically never). Started empty it stays near empty: at
    load 0.95 a mean field has no queue; the CTMC reaches its high mode by fluctuations.
    It reads neither late answers nor retry_on, so both rows are herdsim's default client.

    80 s: the fluid is deterministic and settles within ~10 s (its gauge flat over the
    second half, below)."""
    for backlog in (ROOM + 1, 0):
        data = metafor.scenario(0, 80.0, False, room=ROOM, only_timeouts=False,
                                backlog=backlog).model_dump(mode="json", exclude_unset=True)
        flows = predict(load_scenario({**data, "bin": 1.0})).timeseries
        late = flows[flows["time"] >= 40.0]
        live = late["waiting"] + late["in_flight"]
        assert live.max() - live.min() <= 0.01 * max(live.mean(), 1.0)
        if backlog:
            assert (late["rejected"] > 0).all()
            assert (flows["waiting"] + flows["in_flight"])[flows["time"] > 0].min() > 0
        else:
            assert late["rejected"].sum() == 0 and live.mean() < 2


def test_the_fluid_model_refuses_metafors_client_naming_its_fields():
    """Late answers, and retrying only timeouts, are not in the fluid model: each refused,
    not predicted without them."""
    for late, only, field in ((True, False, "late_answers"), (True, True, "retry_on"),
                              (False, True, "retry_on")):
        data = metafor.scenario(0, 60.0, late, room=ROOM, only_timeouts=only)
        with pytest.raises(ScenarioError, match=rf"^retry\.{field}: "):
            predict(load_scenario(data.model_dump(mode="json", exclude_unset=True)))


@pytest.fixture(scope="module")
def full_starts() -> dict[str, list[dict]]:
    """5 seeds of each client from a full start (99 calls at t = 0), 4,000 s each."""
    return {client: [metafor.run(seed, HORIZON, late, room=ROOM, only_timeouts=only,
                                 backlog=ROOM + 1, warm=WARM) for seed in SEEDS]
            for client, late, only in (("metafor", True, True), ("herdsim", False, False))}


@pytest.mark.slow
@pytest.mark.parametrize("client", ["metafor", "herdsim"])
def test_a_full_queue_never_drains_as_the_ctmc_says(full_starts, client):
    """The CTMC gives a full queue probability ~1e-10 of draining within 10,000 s (its
    hitting time 8e13 s): were the drain 10^10 times likelier, a run of 4,000 s would
    drain with chance ~0.4 and 5 of them would very likely show it. herdsim's are
    censored: a lower bound of 4,000 s each."""
    assert REFERENCE["variants"][0]["p_drained_by_horizon"] < 1e-6
    assert all(run["drain"] is None for run in full_starts[client])


@pytest.mark.slow
def test_the_ctmc_as_it_is_sits_below_herdsims_high_mode_and_the_fix_closes_most_of_it(
        full_starts):
    """As it is, the CTMC's P(full) (0.32) lies far below herdsim's interval with Metafor's
    client: its alpha = 0.25 sends a quarter of the requests that will time out into its
    retry orbit. With alpha 1, an orbit of 60 and an arrival counted once (the json's last
    variant) both gaps, P(full)'s and the mean queue's, shrink to under a third of what
    they were (what is left is presumably the orbit's exponential timeout, not a fixed
    3 s, and its geometric retries, not at most 4)."""
    runs = full_starts["metafor"]
    low, high = interval([r["system_p_full"] for r in runs])
    assert REFERENCE["p_full"] < low
    fixed = variant("alpha 1, orbit 60, an arrival counted once")
    middle = (low + high) / 2
    assert abs(fixed["p_full"] - middle) < abs(REFERENCE["p_full"] - middle) / 3
    assert REFERENCE["mean_queue"] < interval([r["system_mean_n"] for r in runs])[0]
    mean_n = np.mean([r["system_mean_n"] for r in runs])
    assert abs(fixed["mean_queue"] - mean_n) < abs(REFERENCE["mean_queue"] - mean_n) / 3


@pytest.mark.slow
def test_herdsims_default_client_is_full_more_often_than_metafors(full_starts):
    """A call refused at a full room retried 1 ms later (herdsim's default) keeps the room
    fuller than Metafor's client, which drops it for good: P(full) higher, the intervals
    apart."""
    mine = interval([r["system_p_full"] for r in full_starts["herdsim"]])
    theirs = interval([r["system_p_full"] for r in full_starts["metafor"]])
    assert mine[0] > theirs[1]

"""The optimistic-concurrency model (herdsim/model/downstream/occ.py): its semantics pinned
exactly where they are deterministic, invariants over random runs, and the hop distribution.

Budget: about 5 s on one core.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.model.downstream import occ
from herdsim.model.recorder import Recorder
from herdsim.results.result import run

AWS = ("exponential", "full_jitter", "equal_jitter", "decorrelated_jitter")


def occ_scenario(clients: int, strategy: str = "exponential", *, first_attempt: int = 1,
                 hop_mean: float = 0.010, hop_sd: float = 0.002, seed: int = 0,
                 duration: str = "10m", max_retries: int | None = None, bin_: str = "100ms"):
    return load_scenario({
        "name": "occ", "seed": seed, "duration": duration, "bin": bin_,
        "workload": {"rate": 1}, "workers": {"count": clients},
        "downstream": {"model": "occ", "occ": {"hop_mean": hop_mean, "hop_sd": hop_sd,
                                               "first_attempt": first_attempt}},
        "retry": {"strategy": strategy, "base": "5ms", "cap": "2s",
                  "max_retries": max_retries},
    })


@pytest.mark.parametrize("first_attempt", [0, 1])
@pytest.mark.parametrize("clients", [1, 2, 7, 12])
def test_lockstep_without_jitter_is_one_winner_per_round(clients, first_attempt):
    """With every hop exactly h (sd 0) and no jitter, the clients never drift apart: all
    remaining clients read together, so each round exactly one write wins. Round k's
    losers (retry k) sleep min(cap, base 2^(k + first_attempt)) and their next read
    reaches the row h + sleep after they hear the conflict. Hence
    calls = N(N+1)/2 and completion = 4h + sum_{k<N-1} (4h + sleep_k): the four hops per
    attempt, the backoff added to the next read, and the attempt counting."""
    h, base, cap = 0.010, 0.005, 2.0
    result = run(occ_scenario(clients, first_attempt=first_attempt, hop_mean=h, hop_sd=0.0))
    sleeps = [min(cap, base * 2 ** (k + first_attempt)) for k in range(clients - 1)]
    assert result.summary["attempts_total"] == clients * (clients + 1) // 2
    assert result.summary["conflicts"] == clients * (clients - 1) // 2
    assert result.summary["completion_time"] == pytest.approx(
        4 * h + sum(4 * h + s for s in sleeps), rel=1e-12)
    first_sleeps = result.sleeps.groupby("job")["sleep"].first()
    assert np.allclose(first_sleeps, base * 2**first_attempt)


@st.composite
def runs(draw):
    return {
        "clients": draw(st.integers(1, 25)),
        "strategy": draw(st.sampled_from((*AWS, "fixed", "decorrelated_jitter_v2"))),
        "first_attempt": draw(st.integers(0, 2)),
        "hop_sd": draw(st.sampled_from([0.0, 0.002, 0.02])),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


@settings(max_examples=40, deadline=None)
@given(runs())
def test_every_client_succeeds_once_and_every_frame_agrees(params):
    """Without a retry limit every client ends with exactly one successful write, so
    the row receives clients + conflicts writes; each client's writes = its retries + 1;
    every conflict draws one sleep, numbered 0, 1, … per client; the completion time is
    the last success heard; the gauges split the clients still going between
    contending and backing off."""
    scenario = occ_scenario(**params)
    result = run(scenario)
    jobs, sleeps, ts, summary = result.jobs, result.sleeps, result.timeseries, result.summary
    n = params["clients"]
    assert (jobs["outcome"] == "succeeded").all() and len(jobs) == n
    assert summary["attempts_total"] == n + summary["conflicts"]
    assert ts["attempts"].sum() == summary["attempts_total"] == jobs["attempts"].sum()
    assert ts["rejected"].sum() == summary["conflicts"] == len(sleeps)
    retries = sleeps.groupby("job").size().reindex(jobs["job"], fill_value=0)
    assert (jobs["attempts"].to_numpy() == retries.to_numpy() + 1).all()
    assert all((group["attempt"].to_numpy() == np.arange(len(group))).all()
               for _, group in sleeps.groupby("job"))
    assert summary["completion_time"] == jobs["finish"].max()
    going = ts["in_flight"] + ts["delayed"]
    assert (ts["in_flight"] >= 0).all() and (ts["delayed"] >= 0).all()
    done_before = np.searchsorted(np.sort(jobs["finish"]), ts["time"], side="right")
    assert (going.to_numpy() == n - done_before).all()


def test_a_retry_limit_dead_letters_the_losers():
    """max_retries: 0 in lockstep: round 0 has one winner, every other client gives up
    when it hears its conflict; the run has no completion time (not every client
    succeeded)."""
    result = run(occ_scenario(6, hop_sd=0.0, max_retries=0))
    assert result.summary["jobs_succeeded"] == 1
    assert result.summary["jobs_dead_lettered"] == 5
    assert result.summary["completion_time"] is None


def test_the_run_stops_at_its_duration():
    """A duration shorter than the contention leaves clients pending; nothing is recorded
    after the end (writes, answers heard, sleeps)."""
    result = run(occ_scenario(40, "exponential", duration="1s", bin_="10ms"))
    summary = result.summary
    assert summary["jobs_pending"] > 0 and summary["completion_time"] is None
    assert result.attempt_times.max() <= 1.0
    assert result.jobs["finish"].max() <= 1.0 and result.sleeps["time"].max() <= 1.0


@pytest.mark.slow
def test_a_hop_is_a_folded_normal():
    """One client: completion = the sum of 4 independent hops |Normal(mu, sd)|. With
    mu = 1 ms, sd = 2 ms the folding matters (a plain normal would have mean 4 ms); the
    sample mean of 2,000 runs must sit within 4 standard errors of 4 E|X|, and the
    sample variance within 4 of its standard errors (approximately sd^2 sqrt(2/n) x
    4 Var|X|, the sum being close to normal) of 4 Var|X| (scipy's foldnorm)."""
    mu, sd, n = 0.001, 0.002, 2000
    base = occ_scenario(1, hop_mean=mu, hop_sd=sd)
    times = []
    for seed in range(n):
        recorder = Recorder()
        contention = occ.contend(base.model_copy(update={"seed": seed}), recorder)
        times.append(contention.completion_time(recorder))
    times = np.asarray(times)
    hop = stats.foldnorm(mu / sd, scale=sd)
    mean, var = 4 * hop.mean(), 4 * hop.var()
    assert abs(times.mean() - mean) < 4 * math.sqrt(var / n)
    assert abs(times.var(ddof=1) - var) < 4 * var * math.sqrt(2 / (n - 1))


def test_occ_needs_a_number_of_clients():
    """Open-loop callers make no sense for one row contended by N clients: the error
    names the field."""
    with pytest.raises(ScenarioError, match="workers.count: the occ model needs"):
        load_scenario({"name": "x", "duration": "1s", "workload": {"rate": 1},
                       "workers": {"count": None}, "downstream": {"model": "occ"}})


def test_the_family_imports_no_engine():
    """The downstream family declares its members without importing their engines (the
    engines import the family): a fresh interpreter reading a member's declarations
    loads neither the simulation nor SimPy; running one loads its engine."""
    code = ("import sys; from herdsim.model.downstream import family; "
            "m = family.named('occ'); assert not m.queueing and m.done_when; "
            "print(sorted(k for k in ('simpy', 'herdsim.model.simulation', "
            "'herdsim.model.downstream.occ') if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"

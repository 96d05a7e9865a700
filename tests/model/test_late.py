"""Late answers (``retry.late_answers``, herdsim/model/late.py): an answer that comes
after the client's timeout completes the job, once, and its pending retry is not sent.

Checked against invariants (every job ends in one place, a late-answered job is counted
once and its cancelled retry never), a paired property (on the same seeds, late answers
never add retries), and theory: in an M/M/c queue whose waiting room serves calls whose
client left (``serve_abandoned``: nobody leaves the queue, so it stays M/M/c), a client
that times out after T and then sleeps far longer than the run hears a late answer
exactly when its response time R exceeds T, so the late-answered share of jobs is
P(R > T) of M/M/c FCFS.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_every_job_ends_in_one_place, tiny
from scipy import stats

import herdsim
from herdsim.config.loading import validate
from herdsim.errors import ScenarioError
from herdsim.experiments import metafor
from herdsim.model.simulation import Simulation


def erlang_c(lam: float, mu: float, c: int) -> float:
    """The probability that an M/M/c arrival waits."""
    a, rho = lam / mu, lam / (c * mu)
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / (math.factorial(c) * (1 - rho))
    return tail / (head + tail)


def response_tail(lam: float, mu: float, c: int, t: float) -> float:
    """P(R > t) for M/M/c FCFS, R = W + S: W is 0 with probability 1 - C, else
    exponential at theta = c mu - lam; S exponential at mu (theta != mu)."""
    wait, theta = erlang_c(lam, mu, c), c * mu - lam
    both = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
    return (1 - wait) * math.exp(-mu * t) + wait * both


def test_the_response_tail_matches_textbook_limits():
    # no queueing (c large): P(S > t); t = 0: 1
    assert response_tail(0.01, 1.0, 50, 2.0) == pytest.approx(math.exp(-2.0), rel=1e-6)
    assert response_tail(2.4, 1.0, 3, 0.0) == pytest.approx(1.0)


MMC = {"lam": 2.4, "mu": 1.0, "c": 3, "timeout": 2.0}
DURATION, WARM_UP, TAIL = 4000.0, 100.0, 100.0


def mmc(seed: int, late: bool) -> dict:
    return {
        "name": "late-mmc", "seed": seed, "duration": DURATION, "bin": 10.0,
        "workload": {"arrivals": "poisson", "rate": MMC["lam"]},
        "workers": {"count": None},
        "downstream": {"concurrency": MMC["c"], "timeout": MMC["timeout"],
                       "serve_abandoned": True,
                       "service": {"distribution": "exponential", "mean": 1 / MMC["mu"]}},
        # the retry sleeps past the run's end: every late answer comes during the sleep
        "retry": {"strategy": "fixed", "base": "20000s", "cap": "20000s", "max_retries": 1,
                  "late_answers": late},
    }


def test_the_late_answered_share_is_the_mmc_response_tail():
    """5 seeds, jobs arriving after a 100 s warm-up (over 20 relaxation times of this
    queue) and at least 100 s before the end (R > 100 s has probability ~1e-26). A 95%
    t interval of the 5 per-seed shares, widened by 3% of the theory value (as in
    test_queueing_theory.py), must hold P(R > T)."""
    theory = response_tail(MMC["lam"], MMC["mu"], MMC["c"], MMC["timeout"])
    shares = []
    for seed in range(1, 6):
        sim = Simulation(herdsim.load_scenario(mmc(seed, True)))
        res = assert_every_job_ends_in_one_place(sim, sim.run())
        jobs = res.jobs[(res.jobs["arrival"] >= WARM_UP)
                        & (res.jobs["arrival"] <= DURATION - TAIL)]
        assert (jobs["outcome"] == "succeeded").all()  # each answered, in time or late
        assert (jobs["attempts"] == 1).all()  # and no retry was ever sent
        late = jobs["latency"] > MMC["timeout"]
        shares.append(late.mean())
        # the count: one a late-answered job, over the whole run
        assert res.summary["late_answers"] == int((res.jobs["latency"] > MMC["timeout"]).sum())
        assert len(res.sleeps) == 0  # every cancelled retry uncounted
    shares = np.asarray(shares)
    half = stats.t.ppf(0.975, len(shares) - 1) * shares.std(ddof=1) / math.sqrt(len(shares))
    slack = 0.03 * theory
    assert shares.mean() - half - slack <= theory <= shares.mean() + half + slack, \
        (theory, shares)


def test_without_late_answers_those_jobs_wait_for_their_retry():
    data = mmc(1, False)
    data["duration"] = 400.0
    res = herdsim.run(herdsim.load_scenario(data))
    assert "late_answers" not in res.summary
    jobs = res.jobs[res.jobs["arrival"] <= 300.0]
    waited = jobs["outcome"] == "pending"  # asleep until after the run's end
    assert waited.any()
    assert len(res.sleeps) == int(res.summary["timeouts_total"])  # each timeout: a retry


CASES = {
    "open loop": {},
    "queue workers": {"workers": {"count": 40}},
    "breaker and budget": {"workers": {"count": 40},
                           "breaker": {"enabled": True, "minimum_calls": 5},
                           "budget": {"kind": "token_bucket", "preset": "aws"}},
    "an outage": {"downstream": {"outages": [{"start": "50s", "duration": "20s"}]}},
}


@pytest.mark.parametrize("case", CASES)
def test_every_job_ends_in_one_place_with_late_answers(case):
    data = metafor.scenario(3, 200.0, True).model_dump(mode="json", exclude_unset=True)
    data = {**data, "retry": {**data["retry"], "strategy": "exponential", "base": "200ms",
                              "cap": "2s"}}
    for key, value in CASES[case].items():
        data[key] = {**data.get(key, {}), **value}
    sim = Simulation(herdsim.load_scenario(data))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    assert 0 < res.summary["late_answers"] <= res.summary["jobs_succeeded"]


@pytest.mark.parametrize("seed", range(5))
def test_late_answers_never_add_retries(seed):
    """Paired: the same scenario and seed, late answers off and on (Metafor's example,
    300 s: it fills its waiting room within the run)."""
    off = metafor.run(seed, 300.0, False)
    on = metafor.run(seed, 300.0, True)
    assert on["retries_per_s"] <= off["retries_per_s"]


@pytest.mark.parametrize(("change", "field"), [
    ({"downstream": {"timeout": None}}, "downstream.timeout"),
    ({"downstream": {"overload": {"latency_model": "continuous"}}},
     "downstream.overload.latency_model"),
    ({"downstream": {"network_delay": {"distribution": "constant", "mean": "1ms"}}},
     "downstream.network_delay"),
    ({"workers": {"count": 5, "retry_mode": "requeue"}}, "workers.retry_mode"),
    ({"workload": {"keys": 10}}, "workload.keys"),
])
def test_what_late_answers_do_not_run_with_is_refused_by_name(make_scenario, change, field):
    data = make_scenario(retry={"late_answers": True}, downstream={"timeout": "1s"})
    for key, value in change.items():
        data[key] = {**data.get(key, {}), **value}
    with pytest.raises(ScenarioError) as refused:
        herdsim.load_scenario(data)
    (where, problem), = refused.value.problems
    assert where == "retry.late_answers" and field in problem


@pytest.mark.parametrize("replicas", [1, 3])
def test_late_answers_come_from_every_replica(replicas):
    """late answers x replicas: the fleet's replicas each hear the work of a call whose
    client left (the loop read ``downstream.service``, which a fleet has not: a crash).
    A 10x slow outage makes calls of 20 ms mean outlast the 100 ms timeout; each late
    answer completes its job once, after its call timed out."""
    doc = {"name": "late", "seed": 2, "duration": "20s", "workload": {"rate": 200},
           "workers": {"count": 50},
           "retry": {"strategy": "exponential", "base": "100ms", "max_retries": 3,
                     "late_answers": True},
           "downstream": {"concurrency": 20, "replicas": replicas, "timeout": "100ms",
                          "service": {"distribution": "exponential", "mean": "20ms"},
                          "outages": [{"start": "5s", "duration": "3s", "mode": "slow",
                                       "factor": 10}]}}
    sim = Simulation(herdsim.load_scenario(doc))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    late = res.summary["late_answers"]
    assert 0 < late <= res.summary["jobs_succeeded"]
    assert late <= res.timeseries["timeouts"].sum()


def test_a_fleets_replicas_deliver_late_answers():
    """Late answers from a tier with replicas: each replica's service hears its wasted
    work (a 100 ms timeout against 50 ms mean service under load), and every job still
    ends once."""
    sc = validate(tiny(duration=10, workload={"rate": 300}, workers={"count": 50},
                       retry={"late_answers": True, "max_retries": 3},
                       downstream={"timeout": 0.1, "replicas": 3, "concurrency": 5,
                                   "service": {"distribution": "exponential",
                                               "mean": 0.05}}))
    sim = Simulation(sc)
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    assert res.timeseries["late_answers"].sum() > 0


@pytest.mark.parametrize("count", [40, None])
def test_an_attempt_counts_as_its_call_leaves_with_late_answers(count):
    """With late answers an attempt is counted on its job when its call leaves, after the
    attempt's overhead: an answer that ends the job during that overhead sends no call and
    counts none. So every job's attempts add up to the calls the downstream received
    (the general loop counts an attempt as its overhead starts; a job answered meanwhile
    would count one call more than was sent)."""
    data = metafor.scenario(3, 300.0, True).model_dump(mode="json", exclude_unset=True)
    data["retry"] = {**data["retry"], "strategy": "exponential", "base": "200ms",
                     "cap": "2s"}
    data["workers"] = {**data.get("workers", {}), "count": count, "attempt_overhead": {
        "distribution": "exponential", "mean": "200ms"}}
    sim = Simulation(herdsim.load_scenario(data))
    res = assert_every_job_ends_in_one_place(sim, sim.run())
    assert res.summary["late_answers"] > 0
    assert int(res.jobs["attempts"].sum()) == int(res.summary["attempts_total"])

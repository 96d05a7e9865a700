"""The reproductions (herdsim/experiments/reproduce.py) at reduced size: aws-2015 against
the published claims; collapse and retries against the originals' own rules (re-stated
here in a few lines each from github.com/mbrooker/simulator_example) and the model's
theory; and the ``herdsim reproduce`` command. docs/validation.md has the full-size
numbers, beside the originals' (benchmarks/originals.py).

Budget: about 15 s on one core.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.config.loading import load_scenario
from herdsim.experiments import reproduce as rp
from herdsim.results import result as results


@pytest.fixture(scope="module")
def aws() -> pd.DataFrame:
    """100 clients, 20 runs per strategy (the blog: 100)."""
    return rp.aws_2015(runs=20, clients=(100,), processes=1).table.set_index("strategy")


def test_aws_table_has_the_published_columns():
    result = rp.aws_2015(runs=2, clients=(10, 20), strategies=("full_jitter",), processes=1)
    assert list(result.table.columns) == ["clients", "strategy", "calls", "completion_time"]
    assert list(result.table["clients"]) == [10, 20]
    assert len(result.runs) == 4


def test_full_jitter_more_than_halves_the_calls_of_exponential(aws):
    """The blog: "with 100 contending clients, Full Jitter more than halves the calls".
    herdsim's full-size ratio is 0.43; a run's calls vary by about 3% (exponential) and
    1% (full jitter), so 20 runs put the ratio within about 0.01 of its mean: 0.5 is
    7 standard errors away."""
    assert aws.loc["full_jitter", "calls"] < 0.5 * aws.loc["exponential", "calls"]


def test_exponential_is_the_clear_loser_in_work_and_time(aws):
    """The blog: no-jitter exponential takes the most calls and the most time. Its
    margins (2x the calls, 10x the time) dwarf the run-to-run spread."""
    for column in ("calls", "completion_time"):
        assert aws[column].idxmax() == "exponential"


def test_equal_jitter_does_more_work_than_full_and_takes_longer(aws):
    """The blog: Equal Jitter does slightly more work than Full Jitter and takes longer.
    At 100 clients herdsim's gap is 16 calls (2%) with a per-run standard deviation of
    7, so 20 runs give a standard error of 2.3: 7 standard errors; the time gap (1.7 s,
    sd 0.6 s per run) is 9. (Beyond ~160 clients the work gap reverses: see
    docs/validation.md.)"""
    assert aws.loc["equal_jitter", "calls"] > aws.loc["full_jitter", "calls"]
    assert aws.loc["equal_jitter", "completion_time"] > aws.loc["full_jitter",
                                                                "completion_time"]


def test_decorrelated_jitter_does_more_work_than_full(aws):
    """The blog: Full Jitter uses less work than Decorrelated Jitter (25% less here,
    far beyond the 1.5% standard error of 20 runs)."""
    assert aws.loc["decorrelated_jitter", "calls"] > aws.loc["full_jitter", "calls"]


class _Uniforms:
    """A stand-in for a random generator: ``random()`` returns the given draws in turn."""

    def __init__(self, draws):
        self._draws = iter(draws)

    def random(self) -> float:
        return next(self._draws)


def _original_jitter_waits(draws) -> list[float]:
    """ClientWithBackoffAndJitter.retry_wait, one call per retry: backoff_time starts at
    10.0 and is doubled before each draw, then random.random() * backoff_time."""
    backoff, waits = 10.0, []
    for u in draws:
        backoff *= 2
        waits.append(u * backoff)
    return waits


def _original_attempts() -> int:
    """Client.timeout when every attempt times out: retries_left starts at 3 and is
    decremented before the test ``retries_left > 0``; each pass that retries sends one
    more attempt."""
    retries_left, attempts = 3, 1
    while True:
        retries_left -= 1
        if retries_left > 0:
            attempts += 1
        else:
            return attempts


def _scenario(arm: str, **overrides):
    data = rp.base_scenario("collapse")
    return load_scenario(data, {**rp.COLLAPSE_ARMS[arm], **overrides})


def test_the_original_jitter_arm_draws_what_the_original_client_waits():
    """The same uniform draws give the same waits: U(0, 20 s), then U(0, 40 s)."""
    draws = [0.0, 0.25, 0.999]
    strategy = _scenario("original jitter").retry.build()
    for first, second in ((draws[0], draws[1]), (draws[2], draws[0]), (0.5, 0.5)):
        mine = [strategy.sleep(n, 0.0, _Uniforms([u])) for n, u in enumerate((first, second))]
        assert mine == pytest.approx(_original_jitter_waits([first, second]), rel=1e-12)


@pytest.mark.parametrize("arm", ["no backoff", "original jitter"])
def test_a_request_makes_as_many_attempts_as_the_original_client(arm):
    """With a 10 s service every attempt times out: each request ends dead-lettered after
    the attempts the original's Client makes (3, not the "3 retries" of its comment)."""
    scenario = _scenario(arm, **{"downstream.service.mean": "10s", "workload.spikes": [],
                                 "workload.rate": 2, "duration": "150s"})
    jobs = results.run(scenario).jobs
    ended = jobs[jobs["outcome"] != "pending"]
    assert len(ended) > 100
    assert set(ended["outcome"]) == {"dead_lettered"}
    assert set(ended["attempts"]) == {_original_attempts()}


def test_service_time_is_fixed_where_the_original_server_fixes_it():
    """Server.start: concurrency += 1, then the request ends 1 s + 10 ms x concurrency
    later (itself included), and nothing it does later changes that. Replayed on
    herdsim's own arrival times (no network, no timeout: a finish is the server's end),
    the original's rule gives every finish to rounding."""
    scenario = _scenario("no backoff", **{
        "downstream.request_delay": None, "downstream.network_delay": None,
        "downstream.timeout": None, "workload.spikes": [], "workload.rate": 60,
        "duration": "30s"})
    jobs = results.run(scenario).jobs.sort_values("arrival")
    done = jobs[jobs["outcome"] == "succeeded"]
    ends: list[float] = []
    expected = []
    for t in jobs["arrival"]:
        ends = [e for e in ends if e > t]  # Server.end: concurrency -= 1
        ends.append(t + 1.0 + 0.01 * (len(ends) + 1))
        expected.append(ends[-1])
    assert len(done) > 1000
    assert done["finish"].to_numpy() == pytest.approx(np.array(expected)[:len(done)],
                                                      abs=1e-9)


def test_collapse_follows_the_timeout_bounds():
    """Theory of the model (docs/validation.md): below 200/9 per second no state where
    every attempt times out can last (3 lambda attempts/s keep the service under 3 s), so
    the spiked run recovers; above ~57/s (the good state's bound with both 100 ms legs)
    every attempt times out even without a spike: goodput ~ 0 and timeouts ~ 3 lambda.
    The dead run is cut to 50 s, judged on its last 30 s: it takes ~15 s for the service
    time to pass 3 s and for every request's 3 attempts to be timing out, so the window
    starts 5 s after that. 3 x 70/s x 30 s = 6,300 timeouts in it (Poisson: 1.3%
    standard error), so 10% is a wide tolerance."""
    alive = rp.collapse(runs=1, rates=(20,), arms=("no backoff",), processes=1)
    assert alive.table["recovered"].tolist() == [1]
    assert set(alive.series["arm"]) == {"no backoff"}
    (title, shown), = alive.printed()
    assert title == "collapse" and shown["recovered"].iloc[0].startswith("1/1 [")
    dead = rp.collapse(runs=1, rates=(70,), arms=("no spike",), processes=1,
                       overrides={"duration": "50s"}).table.iloc[0]
    assert dead["recovered"] == 0 and dead["goodput"] < 0.05 * 70
    assert dead["timeouts"] == pytest.approx(3 * 70, rel=0.10)
    assert 0 <= dead["recovered_low"] < dead["recovered_high"] <= 1


def _original_rules(arm: str, p: float, per_client: float, clients: int,
                    rng: np.random.Generator) -> tuple[float, float]:
    """retry_strategy.py's AdaptiveRetryStrategy(0.1, 5) or CircuitBreakerRetryStrategy
    (NRetries(3), 0.1), one per client, each client's calls made one after another (the
    original interleaves them 10 ms network legs apart, which only reorders a client's
    credits and counts). Returns (success, calls) per request."""
    requests = successes = calls = 0
    for _ in range(clients):
        bucket, first, failures = 5.0, 0.0, 0.0
        for _ in range(rng.poisson(per_client)):
            requests += 1
            calls += 1
            bucket = min(bucket + 0.1, 5.0)  # start(), both strategies
            first += 1.0
            tries = 0
            while rng.random() < p:  # this attempt failed: should_retry()
                if arm == "token bucket":
                    if bucket <= 1.0:
                        break
                    bucket -= 1.0
                else:
                    failures += 1.0
                    if failures / first > 0.1:
                        break
                    tries += 1
                    if tries > 3:
                        break
                calls += 1
            else:
                successes += 1
    return successes / requests, calls / requests


@pytest.mark.parametrize(("arm", "p"), [("token bucket", 0.5), ("retry breaker", 0.05)])
def test_per_client_budgets_follow_the_originals_rules(arm, p):
    """herdsim's arm at 20 requests per client (a 3 s run, 2 s counted) against the
    original's rule replayed 40 times on 100 clients: at p = 0.5 each client's 5 initial
    tokens lift success to 0.66 (one shared bucket: 0.55); at p = 0.05 the cumulative
    ratio over a client's first few requests refuses retries, success 0.964 (a pooled
    count: 0.999). The replays' spread is the spread of one run obeying the rule, so
    4 of its standard deviations (0.018 and 0.009 for the breaker, 0.048 and 0.022 for
    the bucket) bound herdsim's one run; the replays' mean is 6 times tighter. The
    replay at 100 requests per client is within 0.004 of the means of 10 runs of the
    original (benchmarks/originals.py)."""
    overrides = {"duration": "3s", "downstream.outages.0.duration": "3s"}
    result = rp.retries(runs=1, error_rates=(p,), arms=(arm,), processes=1,
                        overrides=overrides)
    row = result.table.iloc[0]
    rng = np.random.default_rng(7)
    replay = np.array([_original_rules(arm, p, 20.0, 100, rng) for _ in range(40)])
    tolerance = 4 * replay.std(axis=0)
    assert row["success"] == pytest.approx(replay[:, 0].mean(), abs=tolerance[0])
    assert row["calls_per_job"] == pytest.approx(replay[:, 1].mean(), abs=tolerance[1])
    assert result.runs["jobs"].iloc[0] > 1800


def test_retry_theory_limits():
    """At p = 0 nothing fails; at p = 1 nothing succeeds, 3 retries cost 4 calls, the
    bucket 1 + 0.1 + 4.5/100 and the breaker none."""
    for arm in ("no retries", "3 retries", "token bucket", "retry breaker"):
        assert rp.retry_theory(arm, 0.0) == (1.0, 1.0)
    assert rp.retry_theory("3 retries", 1.0) == (0.0, 4.0)
    assert rp.retry_theory("token bucket", 1.0) == pytest.approx((0.0, 1.145))
    assert rp.retry_theory("retry breaker", 1.0) == (0.0, 1.0)
    assert rp.retry_theory("3 retries", 0.5)[1] == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert math.isclose(rp.retry_theory("token bucket", 0.5)[0], 0.5 * 1.145)
    # below 1/11 the unbounded bucket retries every failure: all succeed, 1/(1-p) calls
    assert rp.retry_theory("token bucket", 0.05) == pytest.approx((1.0, 1 / 0.95))


def test_the_command_prints_and_writes(tmp_path):
    """``herdsim reproduce aws-2015 --runs 1``: the table printed, CSVs and figure in
    --out; a second run into the same directory is refused with exit code 2."""
    out = tmp_path / "aws"
    runner = CliRunner()
    result = runner.invoke(app, ["reproduce", "aws-2015", "--runs", "1", "--processes", "1",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "calls" in result.output and "exponential" in result.output
    table = pd.read_csv(out / "aws-2015.csv")
    assert list(table.columns) == ["clients", "strategy", "calls", "completion_time"]
    assert len(table) == len(rp.AWS_CLIENTS) * len(rp.AWS_STRATEGIES)
    assert (out / "aws-2015.png").stat().st_size > 0
    again = runner.invoke(app, ["reproduce", "aws-2015", "--out", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_an_unknown_experiment_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "aws-2016", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "no such experiment" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()

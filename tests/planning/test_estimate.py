"""The up-front estimate (herdsim.planning.estimate) against what runs do.

* Its bound of calls holds: on generated scenarios (graphs, fan-out, hedging, retries,
  no DLQ), every tier's measured calls are at most the jobs that came times the tier's
  multiplier; where the retries are unlimited it is an assumption, and says so.
* It is used before anything starts, by run, compare, sweep, the testbed and the API,
  and refuses in one line (exit 2, nothing written) what exceeds the budget, quickly:
  planning never walks the replications.
* Its point estimate of CPU: measured CPU seconds within SLACK = 3 of it (the claim of
  docs/architecture.md; ``benchmarks/estimate.py`` gives every bundled scenario's ratio,
  0.44 to 2.6 on the machine that fitted it). CPU time, not wall time, so that waiting
  for a core does not count; the calibration is measured right before the run.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scenario_gen import repaired, scenarios
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config import bundled
from herdsim.errors import CapacityError, HerdsimError
from herdsim.model.simulation import Simulation
from herdsim.planning import calls, estimate
from herdsim.policies.durations import parse_duration

SLACK = 3.0


@pytest.mark.parametrize("name, overrides", [
    ("outage", {"retry.strategy": "full_jitter", "duration": "30s"}),  # ~1 call per job
    ("metastable", {}),  # 60 s of a storm that never ends: 3 calls per job, 3,000 workers
    ("classes", {}),  # criticality classes: the general loop, a class read per call
], ids=["outage-full_jitter", "metastable", "classes"])
@pytest.mark.slow
def test_measured_cpu_time_lies_in_the_estimated_range(name, overrides):
    """The speed is measured right before the run (not the process's cached figure), so
    that both see the same machine: CPU time itself grows when the other core is busy
    (the same metastable run took 0.37 s of CPU alone and 0.74 s beside the test suite)."""
    sc = herdsim.load_scenario(bundled.path(name), overrides)
    guess = estimate.estimate(sc)
    speed = estimate.calls_per_cpu_second.__wrapped__()
    started = time.process_time()
    herdsim.run(sc)
    cpu = time.process_time() - started
    assert guess.work / speed / SLACK <= cpu <= guess.work / speed * SLACK, (guess, cpu)


def test_short_runs_get_no_time_and_long_ones_do():
    """A run under WORTH_SAYING seconds even at its upper bound says nothing (and measures
    nothing); the bundled outage story (630,000 jobs, 4.4 million calls at most) does."""
    tiny = herdsim.load_scenario(bundled.path("retries"))  # 11,000 jobs
    assert estimate.timing([estimate.estimate(tiny)], measure=False) is None
    long = herdsim.load_scenario(bundled.path("outage"))
    took = estimate.timing([estimate.estimate(long)], measure=False)
    assert took is not None and took.speed == estimate.ASSUMED_SPEED
    guess = estimate.estimate(long)
    assert guess.jobs == pytest.approx(7000 * 90)  # rate x duration
    assert guess.calls == pytest.approx(guess.jobs * 7)  # 1 + max_retries a job
    assert took.likely == pytest.approx(guess.work / estimate.ASSUMED_SPEED)
    assert took.most == pytest.approx(guess.most_work / estimate.ASSUMED_SPEED)
    assert took.likely < took.most


def test_the_estimate_says_what_it_assumes():
    took = estimate.Timing(likely=30.0, most=300.0, speed=200_000.0, runs=4, at_once=2)
    text = took.describe()
    assert text.startswith("15 s (up to 2.5 min")  # 4 runs' CPU over 2 cores
    for words in ("if every call takes all its retries",
                  "200,000 calls per CPU second measured on this machine",
                  "2 runs at a time", "saving and drawing not included"):
        assert words in text
    assert estimate.Timing(2.0, 2.0, 1e5).describe().startswith("2 s:")


@pytest.mark.parametrize("seconds, text", [(3.14, "3.1 s"), (42, "42 s"), (600, "10 min"),
                                           (9000, "2.5 h")])
def test_durations_read_in_the_unit_a_reader_expects(seconds, text):
    assert estimate.duration_text(seconds) == text


def test_unlimited_retries_are_said_to_be_an_assumption():
    """tenacity's preset retries forever at once: its high end counts 20 retries a job, an
    assumption, not a bound, and the text says so."""
    sc = herdsim.load_scenario(bundled.path("stacks"), {"retry.preset": "tenacity"})
    took = estimate.timing([estimate.estimate(sc)], measure=False)
    assert took is not None and took.assumed
    assert "20 where unlimited: more if they hammer a dead downstream" in took.describe()


def test_the_speed_is_measured_in_one_calibration_run(monkeypatch):
    """One run of :data:`CALIBRATION`, not two: ``herdsim run`` pays it before every long
    run, and a second run with warm caches measured within 10% of the first."""
    simulated = []
    real = estimate.family.simulate

    def counted(scenario, *args, **kwargs):
        simulated.append(scenario.name)
        return real(scenario, *args, **kwargs)

    monkeypatch.setattr(estimate.family, "simulate", counted)
    speed = estimate.calls_per_cpu_second.__wrapped__()
    assert simulated == ["calibration"]
    assert 1_000 < speed < 10_000_000  # calls per CPU second, on any machine that runs this


def test_the_calibration_is_short_and_measures_what_a_longer_one_does():
    """About 12,500 calls (``herdsim run`` pays for them before every long run), and the
    same speed as the calibration scenario run twice as long (outage and all moved with
    it): best of five each, the two interleaved so a machine whose load changes slows
    both alike, within 20% (the doc's spread of one calibration on a shared machine;
    alone they agreed within 3%)."""
    downstream = dict(estimate.CALIBRATION["downstream"],
                      outages=[{"start": "10s", "duration": "1s", "mode": "down"}])
    scenarios = {"short": herdsim.load_scenario(estimate.CALIBRATION),
                 "long": herdsim.load_scenario(dict(estimate.CALIBRATION, duration="40s",
                                                    downstream=downstream))}
    calls: dict[str, int] = {}
    speeds: dict[str, list[float]] = {"short": [], "long": []}
    for _ in range(5):
        for name, sc in scenarios.items():
            started = time.process_time()
            calls[name] = len(estimate.family.simulate(sc).recorder.attempts)
            speeds[name].append(calls[name] / max(time.process_time() - started, 1e-3))
    assert 10_000 < calls["short"] < 15_000 and calls["long"] > 1.9 * calls["short"]
    assert max(speeds["short"]) == pytest.approx(max(speeds["long"]), rel=0.2)


# -- every multiplier, in one walk of the graph ----------------------------------------

LAYERS = bundled.path("layers")


def test_calls_multiply_along_the_graph_and_add_over_its_paths():
    """layers.yaml: workers -> frontend -> api -> db, each retrying 3 times: 4, 16, 64
    calls a job at most. A fan-out of 5 on the frontend's edge multiplies everything
    below it by 5; a second path to db adds its calls."""
    sc = herdsim.load_scenario(LAYERS)
    assert [(t.name, t.most) for t in calls.walk(sc, 0.0)] == [
        ("frontend", 4), ("api", 16), ("db", 64)]
    fan = herdsim.load_scenario(LAYERS, {"downstream.calls.0.count": "5"})
    assert [t.most for t in calls.walk(fan, 0.0)] == [4, 80, 320]
    both = herdsim.load_scenario(LAYERS, {"downstream.calls": (
        "[{service: api, retry: {max_retries: 3}}, {service: db, timeout: 1s,"
        " retry: {max_retries: 1}}]")})
    assert [t.most for t in calls.walk(both, 0.0)] == [4, 16, 16 * 4 + 4 * 2]
    guess = estimate.estimate(sc)
    assert guess.calls == pytest.approx(guess.jobs * (4 + 16 + 64))


def test_hedged_copies_count_all_in_the_bound_and_the_first_in_the_estimate():
    """max_attempts copies at most, multiplied down the graph like retries; the estimate
    counts the first (how many more go, the run decides)."""
    doc = yaml.safe_load(LAYERS.read_text())
    doc["services"]["api"]["calls"][0].pop("retry")
    doc["services"]["api"]["calls"][0]["hedging"] = {"max_attempts": 100, "delay": 0}
    sc = herdsim.load_scenario(doc)
    api, db = calls.walk(sc, 0.0)[1:]
    assert (db.most, db.likely) == (api.most * 100, api.likely)


def test_without_a_dlq_a_job_comes_back_and_its_calls_multiply():
    sc = herdsim.load_scenario(bundled.path("outage"), {"dlq.enabled": "false",
                                                         "dlq.redelivery_delay": "10s"})
    assert calls.walk(sc, 0.0)[0].most == 7 * (1 + 90 // 10)


def test_the_walk_is_iterative_on_a_long_chain():
    """A chain of 2,000 services: no recursion, in well under a second (validation
    itself is another room's; the walk reads the validated model)."""
    chain = {f"s{i}": {"calls": [{"service": f"s{i + 1}", "retry": {"max_retries": 0}}]}
             for i in range(1999)} | {"s1999": {}}
    sc = herdsim.load_scenario(LAYERS)
    sc = sc.model_copy(update={"services": {
        name: type(sc.downstream).model_validate(tier) for name, tier in chain.items()},
        "downstream": sc.downstream.model_copy(update={"calls": [
            type(sc.downstream.calls[0]).model_validate({"service": "s0"})]})})
    started = time.perf_counter()
    tiers = calls.walk(sc, 0.0)
    assert len(tiers) == 2001 and time.perf_counter() - started < 1.0


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(st.data())
def test_the_bound_of_calls_holds_on_any_small_graph(data):
    """Each tier's calls, counted by the model, are at most the jobs that came (counted
    too: arrivals are random) times the tier's multiplier, when no retry is unlimited.
    Half the scenarios fail every call at every tier the whole run, retrying 1 ms apart
    (half of those without a DLQ), so that their calls come close to the bound (a
    multiplier left out fails it: checked by leaving out the deliveries or the hedged
    copies; the fan-out's, by the test below)."""
    doc = data.draw(scenarios(), label="scenario")
    assume(doc["downstream"].get("model", "queue") == "queue")  # before the repair's cost
    if data.draw(st.booleans(), label="every call fails"):
        always_fails(doc, redelivered=data.draw(st.booleans(), label="no DLQ"))
    scenario = repaired(doc, data.draw)
    assume(scenario is not None and scenario.downstream.model == "queue")
    guess = estimate.estimate(scenario)
    assume(not guess.unlimited and guess.calls <= 100_000)
    sim = Simulation(scenario)
    finished = sim.run()
    jobs = len(finished.recorder.arrivals) + scenario.workload.backlog
    made = {name: len(record.attempts) for name, record in finished.tiers.items()} or {
        "downstream": len(finished.recorder.attempts)}
    for tier in guess.tiers:
        assert made.get(tier.name, 0) <= jobs * tier.most + 1e-9, (tier, made, jobs)


def always_fails(doc: dict, redelivered: bool = False) -> None:
    """*doc* with every tier in an error outage all run long, serving in 1 ms, retries
    1 ms apart, workers enough to take every job at once; when *redelivered*, without a
    DLQ: a job that gave up is back 10 ms later."""
    seconds = parse_duration(doc["duration"])
    if redelivered:
        doc["dlq"] = {"enabled": False, "redelivery_delay": 0.01}
    fast = {"strategy": "fixed", "base": 0.001, "preset": None}
    doc["workers"] = {"count": 2000}  # every job taken at once
    for tier in [doc.setdefault("downstream", {}), *doc.get("services", {}).values()]:
        tier["outages"] = [{"start": 0, "duration": seconds, "mode": "error"}]
        tier["service"] = {"distribution": "constant", "mean": 0.001}
        for edge in tier.get("calls", []):
            if "hedging" not in edge:
                edge["retry"] = {**edge.get("retry", {}), **fast}
    if "hedging" not in doc:
        doc["retry"] = {**doc.get("retry", {}), **fast}


def test_the_bound_is_reached_where_every_call_fails():
    """Every call at every tier fails, retries 1 ms apart: the jobs that finished made
    every call the multipliers count (a job still retrying at the end made fewer)."""
    doc = yaml.safe_load(LAYERS.read_text())
    doc.update(duration="5s", workload={"rate": 20}, retry={"strategy": "fixed",
                                                             "base": "1ms", "max_retries": 3})
    doc["downstream"]["calls"][0]["count"] = 3
    doc["services"]["db"].pop("overload")
    always_fails(doc)
    sc = herdsim.load_scenario(doc)
    finished = Simulation(sc).run()
    done = len(finished.recorder.finish_id)
    bound = {t.name: t.most for t in estimate.estimate(sc).tiers}
    assert bound == {"frontend": 4, "api": 4 * 3 * 4, "db": 4 * 3 * 4 * 4}
    jobs = len(finished.recorder.arrivals)
    for name, record in finished.tiers.items():
        assert done * bound[name] <= len(record.attempts) <= jobs * bound[name], name


# -- refused before anything starts --------------------------------------------------------


def cli(tmp_path: Path, *args: str):
    """``herdsim ARGS`` in-process from *tmp_path*: the result and its wall seconds."""
    started = time.perf_counter()
    before = set(tmp_path.rglob("*"))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        result = CliRunner().invoke(app, list(args))
    return result, time.perf_counter() - started, set(tmp_path.rglob("*")) - before


def hedged_layers(tmp_path: Path) -> Path:
    """layers.yaml at 2,500 jobs/s (150,000 jobs) with 100 copies at delay 0 on each edge."""
    doc = yaml.safe_load(LAYERS.read_text())
    doc["workload"]["rate"] = 2500
    for edge in (doc["downstream"]["calls"][0], doc["services"]["api"]["calls"][0]):
        edge.pop("retry")
        edge["hedging"] = {"max_attempts": 100, "delay": 0}
    path = tmp_path / "hedged.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


EXAMPLES = {
    "fan-out": ["run", str(LAYERS), "--set", "downstream.calls.0.count=1000"],
    "autoscale": ["run", "autoscale", "--set", "workers.autoscale.max=1000000000",
                  "--set", "workers.autoscale.target=1e-9"],
    "compare replications": ["compare", "retries", "--strategies", "fixed",
                             "--replications", "1000000000"],
    "sweep replications": ["sweep", "retries", "--grid", "workload.rate=10,20",
                           "--replications", "1000000000"],
    "sweep cells": ["sweep", "retries", "--grid", "workload.rate=1:1000:1000",
                    "--grid", "seed=0:999:1000"],
    "compare many runs": ["compare", "outage", "--replications", "10000"],
    "compare arms": ["compare", "retries",
                     "--vary", "workload.rate=" + ",".join(map(str, range(1, 201))),
                     "--vary", "seed=" + ",".join(map(str, range(1000, 1101)))],
}


@pytest.mark.parametrize("args", EXAMPLES.values(), ids=EXAMPLES)
def test_work_beyond_the_budget_is_refused_in_one_line_before_anything_starts(tmp_path,
                                                                              args):
    result, took, new = cli(tmp_path, *args, "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not new, new
    assert took < 5.0  # a CliRunner start and a scenario's validation, no simulation


def test_hedged_copies_beyond_the_budget_are_refused(tmp_path):
    result, _, new = cli(tmp_path, "run", str(hedged_layers(tmp_path)), "--out",
                         str(tmp_path / "out"))
    assert result.exit_code == 2 and "--force" in result.stderr and "CPU" in result.stderr
    assert not new, new


def test_the_refusal_says_the_estimate_the_budget_and_the_flag(tmp_path):
    result, _, _ = cli(tmp_path, *EXAMPLES["fan-out"])
    text = result.stderr
    for words in ("up to", "of CPU", "as estimated", "downstream calls",
                  "beyond the budget (60 min of CPU at 150,000 calls per CPU second, 75% "
                  "of this machine's", "--force"):
        assert words in text, text


def test_planning_never_walks_the_replications():
    """10^9 replications of an arm are refused in milliseconds: one estimate per arm,
    multiplied, never a list of runs."""
    sc = herdsim.load_scenario(bundled.path("retries"))
    started = time.perf_counter()
    with pytest.raises(CapacityError, match="1,000,000,000 runs"):
        estimate.check([sc], at_once=2, replications=10**9)
    assert time.perf_counter() - started < 0.05


RETRIES, OUTAGE = bundled.path("retries"), bundled.path("outage")


@pytest.mark.parametrize("call, refusal", [
    (lambda: herdsim.run(herdsim.load_scenario(LAYERS, {"downstream.calls.0.count": "1000"})),
     "this run may take up to"),
    (lambda: herdsim.run({**yaml.safe_load(RETRIES.read_text()), "workers": {
        "count": 1000, "autoscale": {"metric": "queue_depth", "target": 1e-9, "min": 1,
                                     "max": 10**9}}}),
     "workers.autoscale.max"),
    (lambda: herdsim.compare(RETRIES, strategies=["fixed"], replications=10**9,
                             progress=False), "replications=1000000000: at most 10,000"),
    (lambda: herdsim.compare(OUTAGE, strategies=["fixed"], replications=10_000,
                             progress=False), "10,000 runs (1 x 10,000 replications)"),
    (lambda: herdsim.sweep(RETRIES, ["workload.rate=10,20"], replications=10**9),
     "--replications 1000000000: at most 10,000"),
    (lambda: herdsim.sweep(OUTAGE, ["workload.rate=7000,8000"], replications=10_000),
     "20,000 runs (2 x 10,000 replications)"),
], ids=["run", "autoscale", "compare 1e9", "compare", "sweep 1e9", "sweep"])
def test_the_api_refuses_before_anything_starts(call, refusal, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started = time.perf_counter()
    with pytest.raises(HerdsimError) as caught:
        call()
    assert refusal in str(caught.value) and len(str(caught.value).splitlines()) == 1
    assert time.perf_counter() - started < 5.0 and not list(tmp_path.iterdir())


def test_force_accepts_what_the_budget_refuses():
    sc = herdsim.load_scenario(LAYERS, {"downstream.calls.0.count": "1000"})
    with pytest.raises(CapacityError):
        estimate.check([sc])
    estimate.check([sc], force=True)


def test_no_bundled_scenario_nor_the_stacks_comparison_is_refused():
    """The README's comparison of stacks fits the CPU budget anywhere; its tenacity arm
    needs some 11 GB at most (its storm: 3,000 workers retrying every millisecond for
    70 s), so a machine under 16 GB refuses it, rightly."""
    for name in bundled.names():
        estimate.check([herdsim.load_scenario(bundled.path(name))], at_once=2)
    stacks = bundled.path("stacks")
    arms = [herdsim.load_scenario(stacks, {"retry.preset": p}) for p in
            ("sidekiq", "celery", "aws-standard", "envoy", "tenacity")]
    work = estimate.plan([estimate.estimate(arm) for arm in arms], at_once=2)
    assert work.most_work / estimate.ASSUMED_SPEED < estimate.CPU_BUDGET
    if estimate.total_memory() >= 16e9:
        estimate.check(arms, at_once=2)


def test_the_estimate_is_cheap():
    """It runs before every run: a bundled graph's in well under a millisecond each."""
    sc = herdsim.load_scenario(LAYERS)
    estimate.estimate(sc)
    started = time.perf_counter()
    for _ in range(100):
        estimate.estimate(sc)
    assert (time.perf_counter() - started) / 100 < 1e-3


def test_the_memory_budget_is_three_quarters_of_this_machine():
    assert estimate.MEMORY_SHARE == 0.75 and math.isfinite(estimate.total_memory())


def test_the_testbed_refuses_before_anything_starts(tmp_path):
    """The testbed simulates its scenario beside the real run: a simulation beyond the
    budget is refused before Redis or any process starts, unless forced."""
    from herdsim.testbed import run as testbed_run

    sc = herdsim.load_scenario(bundled.path("testbed"), {"workload.rate": "1000000000",
                                                          "duration": "1h"})
    started = time.perf_counter()
    with pytest.raises(CapacityError, match="this run may"):
        testbed_run.testbed(sc, tmp_path / "out")
    assert time.perf_counter() - started < 1.0 and not list(tmp_path.iterdir())


def test_the_wall_time_is_no_less_than_the_longest_run():
    """Four runs two at a time take their CPU over two cores, but never less than the
    longest one alone (the stacks comparison: tenacity's arm is most of its CPU)."""
    took = estimate.Timing(likely=30.0, most=300.0, speed=2e5, runs=4, at_once=2,
                           longest=(20.0, 250.0))
    assert took.describe().startswith("20 s (up to 4.2 min")


def test_replicas_and_per_caller_views_add_to_the_memory_estimate():
    """A fleet holds its pools, a client-scoped balancer a view per caller, a hash
    balancer its tables: each adds to the estimate's memory, in its own part."""
    from conftest import tiny

    from herdsim.config.loading import validate
    from herdsim.planning.estimate import estimate

    def part(down):
        sc = validate(tiny(duration=10, workers={"count": 500},
                           downstream={"replicas": 10, **down}))
        return dict(estimate(sc).parts)["replicas"]
    proxy = part({})
    client = part({"balancer": {"kind": "least_request", "scope": "client"}})
    maglev = part({"balancer": {"kind": "maglev", "table_size": 1_000_003}})
    assert 0 < proxy < client and maglev > 8 * 1_000_003 * 8
    assert dict(estimate(validate(tiny())).parts)["replicas"] == 0


def test_a_fleets_sweeps_are_work_the_estimate_counts():
    """Outlier detection every microsecond over 1,000 replicas is 1e9 steps a simulated
    second: the estimate says so (hours, not the seconds of the same fleet swept every
    10 s), so the run is not started blind."""
    from conftest import tiny

    from herdsim.config.loading import validate
    from herdsim.planning.estimate import estimate

    def cpu(interval):
        return estimate(validate(tiny(duration=10, downstream={
            "replicas": 1000, "outlier_detection": {"interval": interval}}))).cpu
    assert cpu("1us") > 1000 > 10 > cpu("10s")


@pytest.mark.parametrize(("name", "changes", "knob", "not_knob"), [
    ("periodic", {"workload.clients": "1000000", "duration": "1000000s"},
     "workload.clients", "workload.rate"),  # its rate is clients / interval
    ("outage", {"workload.rate": "100000000"}, "workload.rate", "workload.clients"),
])
def test_the_refusal_names_the_members_own_knob(name, changes, knob, not_knob):
    """A refusal's advice names the field that makes the run smaller for this scenario's
    members: lowering workload.rate does nothing to a periodic workload (its rate is
    clients / interval) or a broker (its clients are workers.count)."""
    sc = herdsim.load_scenario(bundled.path(name), changes)
    with pytest.raises(CapacityError) as refused:
        estimate.check([sc])
    text = str(refused.value)
    assert not_knob not in text
    assert knob in text


def test_a_brokers_jobs_are_its_clients_drops():
    """A broker's jobs are its clients' disconnections: fewer come of fewer clients
    (workers.count), never of a lower workload.rate (unused by the model)."""
    guess = estimate.estimate(herdsim.load_scenario(bundled.path("reconnect")))
    assert "workers.count" in guess.fewer_jobs and "workload.rate" not in guess.fewer_jobs


def test_criticality_classes_add_their_cost_to_the_estimate():
    """Classes change no count of calls but cost CPU per job and call (the general loop)
    and a byte or two per job: the same scenario estimates more work and memory with
    them, and the same calls (the measured check above holds the figure to the run)."""
    with_classes = herdsim.load_scenario(bundled.path("classes"))
    without = herdsim.load_scenario(bundled.path("classes"),
                                    {"workload.criticality": None})
    a, b = estimate.estimate(with_classes), estimate.estimate(without)
    assert a.calls == b.calls and a.likely == b.likely
    assert a.work > b.work and a.most_work > b.most_work and a.bytes > b.bytes


@pytest.mark.parametrize("mechanism", [
    {"downstream.refusal_cost": {"rejected": "10ms"}},  # a refusal takes server time; gc.yaml's:
    {"downstream.degradation": {"kind": "gc", "heap": 256, "baseline": 40,
                                "memory_per_call": 0.5, "cost": 0.2, "recovery": "5s"}},
], ids=["refusal_cost", "degradation"])
def test_a_degrading_or_costly_refusing_server_adds_its_cost_to_the_estimate(mechanism):
    """Degradation and refusal costs change no count of calls but cost CPU per call
    (a degradation 1.26-1.65x a call's CPU, docs/architecture.md): the same calls, more
    work with the mechanism than without it."""
    plain = {"downstream.degradation": None}
    without = herdsim.load_scenario(bundled.path("gc"), plain)
    with_it = herdsim.load_scenario(bundled.path("gc"), {**plain, **mechanism})
    a, b = estimate.estimate(with_it), estimate.estimate(without)
    assert a.calls == b.calls and a.work > b.work and a.most_work > b.most_work


def test_the_fluid_estimate_bounds_the_compiled_loop_without_overstating_its_steps():
    """The fluid model's bound holds its measured CPU (the grid and the compiled loop,
    compiled beforehand: best of 3), and its per-step term is the compiled loop's, not the
    Python loop's 15 us (which overstated metastable.yaml's 30,000 steps some 90x)."""
    from herdsim.fluid import inputs
    from herdsim.fluid.integrate import integrate

    for name in ("metastable", "poison", "retry_after"):
        sc = herdsim.load_scenario(bundled.path(name))
        dt = inputs.step_for(sc)
        integrate(sc, inputs.build(sc, dt))  # (compiled, or loaded from the cache)
        cpu = math.inf
        for _ in range(3):
            started = time.process_time()
            integrate(sc, inputs.build(sc, dt))
            cpu = min(cpu, time.process_time() - started)
        steps = inputs.steps(sc, dt)
        guess = estimate.fluid(steps, 2 * (inputs.retries(sc) + 1), inputs.kernel_cells(sc, dt))
        assert cpu <= guess.most_cpu, (name, cpu, guess)
        if name == "metastable":  # no rate limit, short kernels: the steps' own term
            assert steps * estimate.FLUID_CPU_PER_STEP <= 20 * cpu, (steps, cpu)

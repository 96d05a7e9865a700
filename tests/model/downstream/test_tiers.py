"""The call graph (services that call services): the attempts multiply along a path,
every call at every tier ends in exactly one outcome, a one-tier graph is the single-tier
run, and a bad graph is one line."""

from __future__ import annotations

import copy
import math
import subprocess
import sys

import pytest
from conftest import graph

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.results.result import Result


def simulate(data: dict) -> tuple[Simulation, Result]:
    sim = Simulation(herdsim.load_scenario(copy.deepcopy(data)))
    return sim, Result.from_finished(sim.run())


def test_a_bottom_tier_down_all_run_receives_the_product_of_the_attempts():
    """db down for the whole run: every db call fails, so every edge spends all its
    retries and its fan-out runs to the end: per front call, api gets 2 x (1 + 2) = 6
    calls and db 6 x 3 x (1 + 1) = 36; per job, front gets 1 + 1 = 2 (all jobs end well
    before the run does)."""
    data = graph(**{"services.db.outages": [{"start": 0, "duration": "40s"}]})
    _, res = simulate(data)
    tiers, s = res.summary["tiers"], res.summary
    assert s["jobs_pending"] == 0 and s["jobs_submitted"] > 50
    assert tiers["front"]["calls"] == 2 * s["jobs_submitted"] == s["attempts_total"]
    assert tiers["api"]["calls"] == 6 * tiers["front"]["calls"]
    assert tiers["db"]["calls"] == 36 * tiers["front"]["calls"]
    assert tiers["db"]["succeeded_calls"] == 0


CASES = {
    "down blip": {"services.db.outages": [{"start": "1s", "duration": "1s"}]},
    "blackhole and timeouts": {
        "services.db.outages": [{"start": "1s", "duration": "1s", "mode": "blackhole"}],
        "services.api.calls.0.timeout": "100ms", "downstream.calls.0.timeout": "300ms",
        "downstream.timeout": "1s"},
    "errors, small rooms": {"services.db.outages": [{"start": "1s", "duration": "2s",
                                                     "mode": "error", "error_rate": 0.5}],
                            "services.db.concurrency": 5, "services.db.queue_limit": 5,
                            "services.api.concurrency": 20},
    "slow, budgets, breaker": {
        "services.db.outages": [{"start": "1s", "duration": "2s", "mode": "slow",
                                 "factor": 40}],
        "services.api.calls.0.timeout": "60ms",
        "services.api.calls.0.budget": {"kind": "token_bucket", "preset": "grpc"},
        "downstream.calls.0.breaker": {"enabled": True, "minimum_calls": 5,
                                       "open_duration": "1s"}},
    "hedged, cancelled, deadlines": {
        "services.db.outages": [{"start": "1s", "duration": "2s", "mode": "slow",
                                 "factor": 30}],
        "deadline": "propagate", "downstream.timeout": "400ms",
        "downstream.calls.0.timeout": "250ms", "downstream.calls.0.cancel": True,
        "services.api.calls.0": {"service": "db", "count": 3, "timeout": "150ms",
                                 "cancel": True,
                                 "hedging": {"delay": "10ms", "max_attempts": 3,
                                             "non_fatal": ["timeout", "rejected"]}}},
    "network and rate limit": {"services.db.network_delay": {"mean": "3ms"},
                               "services.db.rate_limit": {"rate": 400, "burst": 20},
                               "services.api.calls.0.timeout": "200ms"},
}


@pytest.mark.parametrize("changes", CASES.values(), ids=list(CASES))
def test_every_call_at_every_tier_ends_in_exactly_one_outcome(changes):
    """Counted by the tier (calls as they arrive, outcomes as their callers hear them or
    as it fails them at t0) and, independently, by its callers (the edges' attempts and
    the answers they got): once everything has ended, calls = succeeded + failed, and
    both sides agree."""
    sim, res = simulate(graph(**changes))
    assert res.summary["jobs_pending"] == 0
    for name, kpis in res.summary["tiers"].items():
        assert kpis["calls"] == kpis["succeeded_calls"] + kpis["failed_calls"], name
        assert kpis["calls"] == res.timeseries[f"{name}_calls"].sum()
        callers = [e for edges in sim.edges.values() for e in edges if e.service == name]
        if callers:
            assert kpis["calls"] == sum(e.sent for e in callers)
            assert kpis["succeeded_calls"] == sum(e.succeeded for e in callers)
            assert kpis["failed_calls"] == sum(e.failed for e in callers)
        else:  # the workers' downstream: the workers are its callers
            assert kpis["calls"] == res.summary["attempts_total"]
            assert kpis["succeeded_calls"] == res.summary["jobs_succeeded"]


def test_a_defended_tier_is_the_defended_downstream_with_its_tier_part_not_a_diamond():
    """A tier is the downstream its section asks for (a defended db is a
    DefendedDownstream) with the tier's counting attached, and no downstream class has
    two bases: defended tiers in a graph count their calls and shed like any other."""
    from herdsim.model.downstream.core import Downstream
    from herdsim.model.downstream.defences import DefendedDownstream

    def family(cls):
        return [cls, *(c for sub in cls.__subclasses__() for c in family(sub))]

    assert all(len(cls.__bases__) == 1 for cls in family(Downstream))
    sim, res = simulate(graph(**{"services.db.admission": {"kind": "fixed", "limit": 2}}))
    db = sim.edges["api"][0].callee
    assert type(db) is DefendedDownstream
    kpis = res.summary["tiers"]["db"]
    assert kpis["calls"] == kpis["succeeded_calls"] + kpis["failed_calls"] > 0
    assert len(sim.tiers["db"].optional["shed_admission"]) > 0  # its defence acted


@pytest.mark.slow
def test_a_one_tier_graph_is_the_single_tier_run_byte_for_byte():
    """The workers' downstream alone, written as a graph (``services: {}``, a name, so
    the graph's runtime serves it and counts its calls), gives the single-tier run's
    frames byte for byte, and its own columns are the run's: calls = attempts,
    succeeded = successes, failed = the rest."""
    data = herdsim.load_scenario("scenarios/outage.yaml", {"duration": "30s"}).to_dict()
    plain = herdsim.run(herdsim.load_scenario(copy.deepcopy(data)))
    data["services"] = {}
    data["downstream"]["name"] = "db"
    tiered = herdsim.run(herdsim.load_scenario(data))
    own = [c for c in tiered.timeseries.columns if c.startswith("db_")]
    assert own == ["db_calls", "db_succeeded", "db_failed", "db_wasted"]
    for name in ("timeseries", "sleeps", "jobs"):
        a = getattr(plain, name)
        b = getattr(tiered, name).drop(columns=own if name == "timeseries" else [])
        assert a.to_csv(float_format="%.17g") == b.to_csv(float_format="%.17g"), name
    ts = tiered.timeseries
    assert (ts["db_calls"] == ts["attempts"]).all()
    assert (ts["db_succeeded"] == ts["success"]).all()  # no poison: a success ends the job
    assert (ts["db_wasted"] == ts["wasted"]).all()
    # every call not succeeded failed, but those still in flight at the end
    unanswered = ts["attempts"].sum() - ts["success"].sum() - ts["db_failed"].sum()
    assert 0 <= unanswered <= tiered.summary["jobs_pending"]
    assert (ts["db_failed"] >= ts["rejected"] + ts["timeouts"] + ts["errors"]).all()
    assert {k: v for k, v in tiered.summary.items() if k not in ("tiers", "wall_seconds",
                                                                 "calls_per_wall_second")} \
        == {k: v for k, v in plain.summary.items() if k not in ("wall_seconds",
                                                                "calls_per_wall_second")}


def test_a_single_tier_scenario_is_written_as_before():
    """No graph, no graph keys: the scenario as written, the summary and the columns."""
    sc = herdsim.load_scenario("scenarios/retries.yaml")
    assert "services" not in sc.to_dict()
    assert "calls" not in sc.to_dict()["downstream"]
    assert "name" not in sc.to_dict()["downstream"]
    res = herdsim.run(sc)
    assert "tiers" not in res.summary


BAD = {
    "unknown service": ({"downstream.calls.0.service": "cache"},
                        "downstream.calls.0.service: unknown service 'cache'"),
    "cycle": ({"services.db.calls": [{"service": "api"}]},
              "services: the calls form a cycle: api -> db -> api"),
    "service timeout": ({"services.db.timeout": "1s"}, "services.db.timeout: a service has "
                                                       "no timeout"),
    "bad name": ({"services": {"Db!": {}}}, "Db!"),
}


@pytest.mark.slow
@pytest.mark.parametrize("changes, message", BAD.values(), ids=list(BAD))
def test_a_bad_graph_is_one_line_naming_the_file_and_the_field(tmp_path, changes, message):
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(graph(**changes)))
    out = subprocess.run([sys.executable, "-m", "herdsim", "validate", str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], out.stderr


def deadline_case(**changes) -> dict:
    """Workers (1 s timeout, no retries) -> front (own work exponential, mean 500 ms,
    never queueing) -> db (200 ms constant, never queueing), no retries anywhere."""
    data = {
        "name": "deadlines", "duration": "200s", "seed": 11,
        "workload": {"rate": 25, "profile": [{"at": 0, "rate": 25}, {"at": 190, "rate": 0}]},
        "workers": {"count": None},
        "retry": {"max_retries": 0},
        "downstream": {"name": "front", "concurrency": 10_000, "timeout": "1s",
                       "service": {"distribution": "exponential", "mean": "500ms"},
                       "calls": [{"service": "db", "retry": {"max_retries": 0}}]},
        "services": {"db": {"concurrency": 10_000,
                            "service": {"distribution": "constant", "mean": "200ms"}}},
    }
    data.update(changes)
    return data


T, M, D = 1.0, 0.5, 0.2  # the workers' timeout, front's mean own work, db's service


def share(count: int, of: int, expected: float) -> None:
    """*count* / *of* is *expected* within 4 binomial standard errors."""
    error = (expected * (1 - expected) / of) ** 0.5
    assert abs(count / of - expected) < 4 * error, (count / of, expected, error)


def test_a_propagated_deadline_cuts_the_bottom_tiers_wasted_work_to_the_remaining_time_rule():
    """front's own work S ~ Exp(mean M); its client leaves at T. Without propagation
    front calls db for every call (its edge has no timeout) and db's work is useless
    whenever S + D > T: front finishes late, P = exp(-(T - D)/M). With ``deadline:
    propagate`` the db call carries T - S: it is not sent when S >= T (P(sent) = 1 -
    exp(-T/M)), and db's work is wasted (its caller leaves first) when T - S < D: P =
    exp(-(T - D)/M) - exp(-T/M). The useless work at the bottom drops from 0.20 to 0.067
    of front's calls."""
    off = herdsim.run(herdsim.load_scenario(deadline_case())).summary["tiers"]
    on = herdsim.run(herdsim.load_scenario(deadline_case(deadline="propagate"))).summary["tiers"]

    n = off["front"]["calls"]
    assert off["db"]["calls"] == n and off["db"]["wasted_calls"] == 0
    share(off["front"]["wasted_calls"], n, math.exp(-(T - D) / M))
    n = on["front"]["calls"]
    share(on["db"]["calls"], n, 1 - math.exp(-T / M))
    share(on["db"]["wasted_calls"], n, math.exp(-(T - D) / M) - math.exp(-T / M))


def test_cancel_stops_a_tier_serving_a_call_its_caller_gave_up():
    """workers -> front -> api (timeout T, ``cancel``) -> db: api's own work S ~ Exp(M).
    When front gives up at T, api stops: it calls db only when S < T (P = 1 -
    exp(-T/M)) and never finishes work for a caller that has left. Without cancel it
    calls db every time, and finishes late when S + D > T."""
    def case(cancel: bool) -> dict:
        data = deadline_case()
        data["downstream"] = {"name": "front", "concurrency": 10_000, "timeout": "5s",
                              "service": {"distribution": "constant", "mean": "1ms"},
                              "calls": [{"service": "api", "timeout": "1s", "cancel": cancel,
                                         "retry": {"max_retries": 0}}]}
        data["services"]["api"] = {"concurrency": 10_000,
                                   "service": {"distribution": "exponential", "mean": "500ms"},
                                   "calls": [{"service": "db", "retry": {"max_retries": 0}}]}
        return data

    off = herdsim.run(herdsim.load_scenario(case(False))).summary["tiers"]
    on = herdsim.run(herdsim.load_scenario(case(True))).summary["tiers"]
    assert off["db"]["calls"] == off["api"]["calls"]
    share(off["api"]["wasted_calls"], off["api"]["calls"], math.exp(-(T - D) / M))
    share(on["db"]["calls"], on["api"]["calls"], 1 - math.exp(-T / M))
    assert on["api"]["wasted_calls"] == 0


MU_SIGMA = (math.log(0.05) - 1.0 / 2, 1.0)  # lognormal service: mean 50 ms, sigma 1
DELAY = 0.06


def lognormal_sf(x: float) -> float:
    """P(S > x) for the lognormal service above."""
    if x <= 0:
        return 1.0
    mu, sigma = MU_SIGMA
    return 0.5 * math.erfc((math.log(x) - mu) / (sigma * math.sqrt(2)))


def hedged_cdf(x: float) -> float:
    """P(min(S1, DELAY + S2) <= x) when the second copy leaves at DELAY only if the first
    has not answered: P(L > x) = P(S1 > x) P(S2 > x - DELAY) (the second factor 1 before
    DELAY)."""
    return 1 - lognormal_sf(x) * (lognormal_sf(x - DELAY) if x > DELAY else 1.0)


def hedged_run(**hedging) -> Result:
    return herdsim.run(herdsim.load_scenario({
        "name": "hedged", "duration": "300s", "seed": 5,
        "workload": {"rate": 40, "profile": [{"at": 0, "rate": 40}, {"at": 295, "rate": 0}]},
        "workers": {"count": 400},  # idle most of the time: a job is taken as it arrives
        "downstream": {"concurrency": 100_000,
                       "service": {"distribution": "lognormal", "mean": "50ms", "sigma": 1.0}},
        "hedging": {"delay": f"{DELAY * 1000:g}ms", "max_attempts": 2, **hedging},
    }))


def test_hedged_calls_cost_p_s_above_the_delay_and_take_the_minimum_of_the_two_copies():
    """gRPC A6 hedging at low load (no queueing): the second copy leaves iff the first has
    not answered by DELAY, so extra calls / jobs = P(S > DELAY); a job's latency is
    min(S1, DELAY + S2), whose CDF at its own 10/50/90/99% quantiles must match the
    run's within 4 binomial standard errors."""
    res = hedged_run()
    jobs = res.jobs
    n = len(jobs)
    assert res.summary["jobs_pending"] == 0 and res.summary["jobs_succeeded"] == n
    share(res.summary["attempts_total"] - n, n, lognormal_sf(DELAY))
    assert res.summary["tiers"]["downstream"]["calls"] == res.summary["attempts_total"]
    latency = jobs["latency"].to_numpy()
    for p in (0.1, 0.5, 0.9, 0.99):
        lo, hi = 0.0, 10.0
        for _ in range(60):  # the theoretical quantile, by bisection
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if hedged_cdf(mid) < p else (lo, mid)
        share(int((latency <= lo).sum()), n, p)


def test_the_hedging_throttle_is_grpcs_token_bucket():
    """Every copy fails at once with a non-fatal ``down``: the next copy goes at once
    while the tokens (10, a failure costs 1) stay above 5. Calls 1 and 2 send 3 and 2
    copies (tokens 10 -> 7 -> 5), every later call only its first: copies = calls + 3."""
    data = graph(**{"services.db.outages": [{"start": 0, "duration": "40s"}]})
    data["services"]["api"]["calls"] = [{"service": "db", "hedging": {
        "delay": "1s", "max_attempts": 3, "non_fatal": ["down"],
        "throttle": {"max_tokens": 10, "token_ratio": 0.1}}}]
    data["downstream"]["calls"][0]["count"] = 1
    data["downstream"]["calls"][0]["retry"] = {"max_retries": 0}
    tiers = herdsim.run(herdsim.load_scenario(data)).summary["tiers"]
    assert tiers["api"]["calls"] > 20
    assert tiers["db"]["calls"] == tiers["api"]["calls"] + 3


def test_an_edge_hedges_or_retries_not_both():
    """As in gRPC: a written retry beside hedging is refused; an unwritten one is not."""
    data = graph()
    data["services"]["api"]["calls"][0]["hedging"] = {"delay": "10ms"}
    with pytest.raises(herdsim.ScenarioError, match="hedges or retries"):
        herdsim.load_scenario(copy.deepcopy(data))
    del data["services"]["api"]["calls"][0]["retry"]
    sc = herdsim.load_scenario(data)
    assert herdsim.load_scenario(sc.to_dict()).to_dict() == sc.to_dict()




@pytest.mark.slow
def test_a_graph_comparison_is_saved_read_back_and_reported_per_tier(tmp_path):
    """compare -> save -> load_outputs: the tiers' numbers survive as
    ``tiers.<tier>.<key>`` columns, the report's per-tier table has a row per arm and
    tier, and the timeline a row per tier."""
    from herdsim.outputs.compare_dir import load_outputs
    from herdsim.outputs.report.page import tier_section
    from herdsim.plots.figures import tier_names

    data = graph(**{"services.db.outages": [{"start": "1s", "duration": "1s"}],
                    "duration": "10s"})
    comparison = herdsim.compare(herdsim.load_scenario(data), strategies=["exponential"],
                                 vary={"services.api.calls.0.retry.max_retries": [0, 2]},
                                 processes=1)
    herdsim.save(comparison, tmp_path / "cmp", formats=[])
    back = load_outputs(tmp_path / "cmp")
    assert list(back.summary["tiers.db.calls"]) == list(comparison.summary["tiers.db.calls"])
    assert tier_names(back) == ["front", "api", "db"]
    table = tier_section(back)
    tables = table.split("</table>")[:-1]  # narrow tables, each of every arm and tier
    assert tables and all(t.count("<tr") == 1 + 2 * 3 for t in tables)  # header, 2 x 3
    titles = [ax.get_title(loc="left") for ax in back.plot("timeline").axes]
    assert [t.split(":")[0] for t in titles if "calls reaching it" in t] == ["front", "api", "db"]
    assert tier_section(herdsim.compare(herdsim.load_scenario("scenarios/retries.yaml"),
                                        strategies=["exponential"], processes=1)) == ""


@pytest.mark.slow
def test_the_run_command_tables_every_tier_with_the_summarys_numbers(tmp_path):
    """``herdsim run`` on a graph prints a row per tier, top first, whose calls are the
    summary's ``tiers`` counts."""
    import json

    import yaml
    from typer.testing import CliRunner

    from herdsim.cli import app

    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(graph(duration="8s")))
    done = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")],
                              env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    tiers = json.loads((tmp_path / "out" / "summary.json").read_text())["tiers"]
    rows = [line for line in done.output.splitlines()
            if line.strip("│ ").split(" ")[0] in tiers]
    assert [row.strip("│ ").split(" ")[0] for row in rows] == ["front", "api", "db"]
    for row, (name, kpis) in zip(rows, tiers.items(), strict=True):
        assert f"{kpis['calls']:,}" in row, (name, row)


def test_an_outage_at_a_lower_tier_is_the_runs_outage_on_every_surface():
    """The db's blackhole is the run's outage: recovery is measured from its end, the
    report's verdict speaks of it and of the db's crash rule, the KPI table never says
    "no outage"."""
    from herdsim.outputs.report.verdict import assumptions, verdict
    from herdsim.results.comparison import Comparison

    sc = herdsim.load_scenario(graph(**{
        "duration": "30s", "workload": {"rate": 20},  # steady: healthy means serving it
        "services.db.outages": [{"start": "12s", "duration": "1s", "mode": "down"}],
        "services.db.overload": {"collapse": {"window": "100ms", "threshold": 10_000}}}))
    assert not sc.downstream.outages and sc.all_outages
    res = herdsim.run(sc)
    assert res.summary["outages"] == 1 and res.summary["recovery_time"] is not None
    c = Comparison.from_result(res)
    assert "After the outage ended at 13s" in verdict(c)[0]
    said = " ".join(assumptions(c))
    assert "db crashes" in said and "services.db.overload.collapse=null" in said
    assert "no outage" not in c.summary.to_string()


def test_a_misspelt_field_of_a_service_gets_a_suggestion(tmp_path):
    """A service's section is a downstream's: a typo in it is named with the field meant,
    as a typo in ``downstream`` is."""
    data = graph()
    data["services"]["db"]["concurency"] = data["services"]["db"].pop("concurrency")
    with pytest.raises(herdsim.ScenarioError, match="did you mean 'concurrency'"):
        herdsim.load_scenario(data)

"""``herdsim boundary`` on hostile input: every refusal one line naming the option or the
field, exit code 2, before any simulation runs and with no output directory left."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.experiments import boundary as search

SCENARIO = "metastable_sweep.yaml"  # workload.rate 700, one outage of 4 s at 10 s of 60 s


@pytest.fixture(autouse=True)
def no_simulation(monkeypatch):
    """A refusal comes before any simulation: running one fails the test."""
    def simulate(*args, **kwargs):
        raise AssertionError("a simulation ran before the refusal")
    monkeypatch.setattr(search, "simulate", simulate)


@pytest.mark.parametrize(("args", "said"), [
    (["--find", "retry.strategy"], "--find retry.strategy: not a numeric setting"),
    (["--find", "dlq.enabled"], "--find dlq.enabled: not a numeric setting"),
    (["--find", "workload.nope"], "--find workload.nope: no such setting"),
    (["--find", "downstream.outages.5.duration"], "outages.5.duration: no such setting"),
    (["--find", "downstream.overload.collapse.load_limit"], "not set in this scenario"),
    (["--find", "seed"], "--find seed: the seed is the search's own"),
    (["--find", "workload.rate", "--range", "900:300"], "--range 900:300: expected 0 < LOW"),
    (["--find", "workload.rate", "--range", "-5:10"], "--range -5:10: expected 0 < LOW"),
    (["--find", "workload.rate", "--range", "0:10"], "--range 0:10: expected 0 < LOW"),
    (["--find", "downstream.outages.0.duration", "--range", "-1s:2s"],
     "--range -1s:2s: expected 0 < LOW"),
    (["--find", "workload.rate", "--range", "abc"], "--range abc: expected LOW:HIGH"),
    (["--find", "workload.rate", "--range", "300:1e400"], "must be finite"),
    (["--find", "workload.rate", "--range", "300:1e12"],
     "at workload.rate = 1e+12 (its end) the scenario is invalid: workload.rate:"),
    (["--find", "downstream.outages.0.start", "--range", "1s:500s"],
     "the scenario is invalid: downstream.outages.0: outage ends at"),
    (["--find", "workload.rate", "--find", "workload.rate"], "given twice"),
    (["--find", "workload.rate", "--find", "retry.max_retries", "--find", "retry.base"],
     "--find: give one or two paths, got 3"),
    (["--find", "retry.max_retries", "--range", "2.2:2.4"],
     "retry.max_retries is a whole number and the range holds one value only (2)"),
    (["--find", "downstream.concurrency", "--range", "0.1:0.4"], "holds one value only (0)"),
    (["--find", "retry.max_retries", "--set", "retry.max_retries=0"],
     "today's value is 0, so there is no default range"),
    (["--find", "workload.rate", "--find", "retry.max_retries", "--set",
      "retry.max_retries=0"], "--find retry.max_retries: today's value is 0"),
    (["--find", "workload.rate", "--find", "downstream.outages.0.duration", "--set",
      "downstream.outages.0.duration=30s"],
     "--find downstream.outages.0.duration: at downstream.outages.0.duration = 60"),
    (["--find", "workload.rate", "--range", "300:900", "--max-simulations", "5"],
     "--max-simulations 5: the first batch alone takes 12"),
    (["--find", "workload.rate", "--range", "300:900", "--max-simulations", "100000000"],
     "100,000,000 runs"),
    (["--find", "workload.rate", "--set", "duration=720h"], "may take up to"),
])
def test_a_hostile_boundary_is_refused_in_one_line(tmp_path, scenarios_dir, args, said):
    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["boundary", str(scenarios_dir / SCENARIO), *args,
                                      "--out", str(out)], terminal_width=400)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert said in result.output
    assert not out.exists()


def test_a_map_without_both_axes_is_refused_before_the_search(tmp_path, scenarios_dir):
    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["boundary", str(scenarios_dir / SCENARIO),
                                      "--find", "workload.rate", "--find", "retry.base",
                                      "--map", str(tmp_path / "nowhere"), "--out", str(out)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "not a sweep directory" in result.output and not out.exists()


def sweep_of(out, scenarios_dir, grid: list[str]):
    """A finished sweep of the scenario cut to 20 s, under full jitter alone."""
    import herdsim

    herdsim.sweep(scenarios_dir / SCENARIO, grid=grid, strategies=["full_jitter"],
                  sets={"duration": "20s"}, out=out)
    return out


@pytest.mark.parametrize(("grid", "said"), [
    (["workload.rate=300,600", "retry.max_retries=2,4", "retry.base=1s,2s"],
     "it also sweeps retry.base; its map shows the two --find paths only"),
    (["workload.rate=300,600", "retry.max_retries=2,4"],
     "it has no panel of the scenario's strategy exponential (full_jitter)"),
])
def test_a_map_that_cannot_hold_the_curve_is_refused_before_the_search(
        tmp_path, scenarios_dir, grid, said):
    """A third swept axis, or no panel of the scenario's strategy: found only when the
    curve was drawn over the map, after every simulation."""
    swept = sweep_of(tmp_path / "s", scenarios_dir, grid)
    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["boundary", str(scenarios_dir / SCENARIO),
                                      "--find", "workload.rate", "--find",
                                      "retry.max_retries", "--map", str(swept), "--out",
                                      str(out)], terminal_width=400)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert said in result.output and not out.exists()

"""``herdsim boundary``: the logistic fit against known curves, the search's stopping, and
its refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import tiny
from typer.testing import CliRunner

from herdsim.cli import app
from herdsim.config.loading import load_scenario
from herdsim.errors import UsageError
from herdsim.experiments import boundary as search


@pytest.mark.parametrize(("x50", "scale", "below"), [(480.0, 15.0, True), (3.2, 0.4, False)])
def test_the_fit_finds_a_known_crossing_within_its_interval(x50, scale, below):
    """Bernoulli draws from P(recover) = 1 / (1 + exp((x - x50) / scale)) (or its mirror):
    the fitted crossing's 95% interval holds x50 (in 19 of 20 seeds at least, its
    coverage), and the side it recovers on is right."""
    covered = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x = np.repeat(np.linspace(x50 - 3 * scale, x50 + 3 * scale, 10), 10)
        sign = 1.0 if below else -1.0
        p = 1.0 / (1.0 + np.exp(sign * (x - x50) / scale))
        runs = pd.DataFrame({"x": x, "recovered": (rng.random(x.size) < p).astype(float)})
        value, low, high, side = search.fit(runs, not below)
        assert side == below
        covered += low <= x50 <= high
    assert covered >= 17  # 95% coverage: P(fewer than 17 of 20) < 2%


class Fake:
    """Runs at x recover with probability 1 / (1 + exp((x - 500) / 10)), seeded."""

    def __init__(self):
        self.calls = 0

    def __call__(self, base, path, points, replications, seed, *args):
        rng = np.random.default_rng(seed + 7)
        rows = []
        for x in points:
            p = 1.0 / (1.0 + np.exp((x - 500.0) / 10.0))
            rows += [{"x": x, "recovered": float(rng.random() < p)}
                     for _ in range(replications)]
        self.calls += len(points) * replications
        return pd.DataFrame(rows)


def test_the_search_stays_in_its_budget_and_brackets_the_edge(monkeypatch):
    fake = Fake()
    monkeypatch.setattr(search, "simulate", fake)
    monkeypatch.setattr(search, "fluid_crossing", lambda *a: (420.0, True))  # 16% off
    found = search.boundary(load_scenario(tiny(workload={"rate": 700})), "workload.rate",
                            (100.0, 2000.0))
    assert found.simulations == fake.calls <= search.MAX_SIMULATIONS
    assert found.below and found.low <= 500 <= found.high
    assert "workload.rate up to" in found.text() and f"{fake.calls} simulations" in found.text()
    # the fluid's answer is a step of its 24-point log grid over the range: said as one
    step = (2000.0 / 100.0) ** (1 / (search.FLUID_POINTS - 1))
    assert found.fluid_from == pytest.approx(420.0 / step)
    assert f"the fluid model put it between {420.0 / step:.4g} and 420;" in found.text()
    figure = found.plot()
    assert "past the edge" in figure.axes[0].get_title()  # 700 jobs/s is beyond 500


def test_a_path_that_is_not_a_number_is_refused():
    with pytest.raises(UsageError, match="not a numeric setting"):
        search.boundary(load_scenario(tiny()), "retry.strategy")


def test_the_cli_refuses_a_bad_path_in_one_line(tmp_path, scenarios_dir):
    said = CliRunner().invoke(app, ["boundary", str(scenarios_dir / "metastable_sweep.yaml"),
                                    "--find", "workload.nope", "--out", str(tmp_path / "b")])
    assert said.exit_code == 2 and len(said.output.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_a_value_is_placed_between_the_maps_cells():
    """The map's cells sit at index positions: a value halfway (in log for a geometric
    axis, linearly otherwise) lands halfway between two cells."""
    from herdsim.plots.boundary import _placer

    assert _placer([2.0, 4.0, 8.0])(np.sqrt(8.0)) == pytest.approx(0.5)
    assert _placer([300.0, 500.0, 700.0, 900.0])(600.0) == pytest.approx(1.5)


def test_the_map_needs_two_paths(tmp_path, scenarios_dir):
    said = CliRunner().invoke(app, ["boundary", str(scenarios_dir / "metastable_sweep.yaml"),
                                    "--find", "workload.rate", "--map", str(tmp_path),
                                    "--out", str(tmp_path / "b")])
    assert said.exit_code == 2 and "two --find paths" in said.output


def test_two_paths_trace_a_curve_that_reads_as_a_list(monkeypatch):
    """The first path's edge at each value of the second (half to twice today's, each
    once), as a Curve: indexable, its text one line per value naming it, its simulations
    the sum of its boundaries'."""
    fake = Fake()
    monkeypatch.setattr(search, "simulate", fake)
    monkeypatch.setattr(search, "fluid_crossing", lambda *a: (480.0, True))
    base = load_scenario(tiny(workload={"rate": 700},
                              downstream={"outages": [{"start": "0.5s", "duration": "0.4s"}]}))
    found = search.boundary(base, ["workload.rate", "downstream.outages.0.duration"],
                            (100.0, 2000.0), max_simulations=12)
    assert isinstance(found, search.Curve) and len(found) == search.ALONG
    assert found.values == pytest.approx(np.geomspace(0.2, 0.8, search.ALONG))
    assert [edge.scenario.downstream.outages[0].duration for edge in found] == \
        pytest.approx(found.values)
    assert found.simulations == fake.calls == sum(edge.simulations for edge in found)
    lines = found.text().splitlines()
    assert lines[0].startswith("at downstream.outages.0.duration 0.2 s: recovers with "
                               "workload.rate up to")
    assert lines[-1] == f"{fake.calls} simulations in all"


def test_an_integer_setting_is_only_ever_run_at_whole_numbers(monkeypatch):
    """The first batch around the fluid's answer, clamped into the range, is typed after
    the clamp: 0.8 x 2.5 = 2 lies under 2.2, and used to run as 2.2 retries."""
    seen: list = []

    def simulate(base, path, points, replications, seed, *args):
        seen.extend(points)
        return pd.DataFrame({"x": np.repeat(points, replications),
                             "recovered": np.tile([1.0, 0.0], len(points) * replications // 2)})

    monkeypatch.setattr(search, "simulate", simulate)
    monkeypatch.setattr(search, "fluid_crossing", lambda *a: (2.5, True))
    search.boundary(load_scenario(tiny()), "retry.max_retries", (2.2, 7.6), max_simulations=24)
    assert seen and all(isinstance(x, int) for x in seen)


def test_a_maps_axis_is_spread_as_it_was_swept():
    assert search.spread([0.25, 0.5, 1, 2, 4, 8, 16]) == pytest.approx(
        [0.25, 0.707107, 2, 5.656854, 16], rel=1e-5)
    assert search.spread([300, 400, 500, 600, 700, 800, 900]) == pytest.approx(
        [300, 450, 600, 750, 900])
    assert search.spread([0, 1, 2, 3, 6]) == pytest.approx([0, 1.5, 3, 4.5, 6])

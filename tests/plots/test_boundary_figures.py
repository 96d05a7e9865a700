"""The safe-operating figure and the boundary curve (herdsim/plots/boundary.py): the fit
the edge comes from drawn, the runs counted, the lines told apart without colour, every
text on the canvas; and the sweep map's title and legend kept on a one-strategy map."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import tiny
from matplotlib.axis import Tick
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from herdsim.config.loading import load_scenario
from herdsim.experiments.boundary import Boundary, Curve, fit
from herdsim.plots import boundary as figures
from herdsim.plots.metastability_map import plot_map

X50, SCALE = 480.0, 15.0


def edge(fluid: float | None = 470.0, current: float = 700.0, seed: int = 0,
         path: str = "workload.rate") -> Boundary:
    """A boundary fitted to Bernoulli runs of P(recover) = 1 / (1 + exp((x - 480) / 15)),
    four at each of nine values."""
    rng = np.random.default_rng(seed)
    x = np.repeat(np.linspace(X50 - 3 * SCALE, X50 + 3 * SCALE, 9), 4)
    p = 1.0 / (1.0 + np.exp((x - X50) / SCALE))
    runs = pd.DataFrame({"x": x, "recovered": (rng.random(x.size) < p).astype(float)})
    value, low, high, below = fit(runs, True)
    scenario = load_scenario(tiny(workload={"rate": current}))
    return Boundary(path, value, low, high, fluid, below, runs, scenario, current,
                    None if fluid is None else fluid / 1.05)


def off_canvas(figure) -> list[str]:
    """The texts (titles, legends, annotations, axis labels: not the tick labels, which
    matplotlib keeps beyond the view) drawn off *figure*'s canvas."""
    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    width, height = figure.canvas.get_width_height()
    ticks = {id(t) for tick in figure.findobj(Tick) for t in (tick.label1, tick.label2)}
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in figure.findobj(Text)
             if id(t) not in ticks and t.get_visible() and t.get_text().strip()]
    return [text for text, box in boxes if box.x0 < -2 or box.y0 < -2
            or box.x1 > width + 2 or box.y1 > height + 2]


def line(figure, starts: str):
    ax = figure.axes[0]
    return next(artist for artist in ax.get_lines() if artist.get_label().startswith(starts))


def test_the_figure_draws_the_logistic_fit_through_its_edge():
    """The fitted curve crosses 1/2 at the edge it reports (x50 = -a/b, within the grid's
    step) and falls with x (recovering below); it is the curve the runs were fitted with."""
    found = edge()
    figure = found.plot()
    fitted = line(figure, "logistic fit")
    xs, ys = fitted.get_xdata(), fitted.get_ydata()
    assert np.all(np.diff(ys) < 0)
    crossing = xs[np.argmin(np.abs(ys - 0.5))]
    assert abs(crossing - found.value) <= (xs[1] - xs[0])
    np.testing.assert_allclose(ys, found.probability(xs))
    assert fitted.get_color() == "black" and fitted.get_linestyle() == "-"


def test_each_value_tried_says_how_many_of_its_runs_recovered():
    found = edge()
    texts = [t.get_text() for t in found.plot().axes[0].texts]
    counted = [tuple(int(v) for v in text.split("/")) for text in texts if "/" in text]
    share = found.runs.groupby("x")["recovered"].agg(["sum", "count"])
    assert sorted(counted) == sorted(zip(share["sum"].astype(int), share["count"],
                                         strict=True))


@pytest.mark.parametrize("fluid", [470.0, None])
def test_lines_are_told_apart_by_style_and_the_fluid_answer_shown_when_there(fluid):
    figure = edge(fluid=fluid).plot()
    ax = figure.axes[0]
    styles = {artist.get_label().split(":")[0]: artist.get_linestyle()
              for artist in ax.get_lines()}
    assert styles["the edge, P(recover) = 1/2"] == "-"
    assert next(v for k, v in styles.items() if k.startswith("your setting")) == "--"
    assert ("the fluid model's answer" in styles) is (fluid is not None)
    if fluid is not None:
        assert styles["the fluid model's answer"] == ":"
    assert not off_canvas(figure)


def test_a_duration_is_shown_with_its_unit():
    found = edge(path="downstream.outages.0.duration")
    assert found.unit == "s"
    assert f"up to {found.value:.4g} s (95% CI" in found.text()
    assert found.plot().axes[0].get_xlabel() == "downstream.outages.0.duration (s)"


def test_the_curve_shades_the_side_that_recovers_and_places_today():
    edges = [edge(seed=s) for s in range(5)]
    values = [1.0, 2.0, 4.0, 8.0, 16.0]
    traced = Curve("workload.rate", "downstream.outages.0.duration", values, edges,
                   edges[0].scenario)
    figure = figures.curve(traced, (4.0, 700.0), "tiny")
    ax = figure.axes[0]
    labels = [h.get_label() for h in ax.get_legend_handles_labels()[0]]
    assert any(label.startswith("recovers (P(recover) > 1/2): workload.rate below")
               for label in labels)
    today = next(label for label in labels if label.startswith("today"))
    assert "today: downstream.outages.0.duration 4 s" in today and "past the edge" in today
    assert ax.get_xscale() == "log"
    assert not off_canvas(figure)
    lines = traced.text().splitlines()
    assert lines[0].startswith("at downstream.outages.0.duration 1 s: recovers with")
    assert lines[-1] == f"{traced.simulations} simulations in all"


def test_a_one_strategy_map_keeps_its_title_and_legend_on_the_canvas():
    """A single strategy over 7 values made a figure too narrow for the title's first line
    and the three classes' legend in a row: both ran off the canvas."""
    values = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    runs = pd.DataFrame([{"strategy": "exponential", "x": v, "recovery_time": 1.0,
                          "collapses_after_outage": 0, "goodput_tail": 1.0, "load": 0.5,
                          "outage_seconds": v} for v in values])
    manifest = {"axes": [{"path": "x", "values": values}], "strategies": ["exponential"],
                "replications": 1, "scenario": {"name": "metastable_sweep"}}
    figure = plot_map(runs, manifest)
    assert not off_canvas(figure)

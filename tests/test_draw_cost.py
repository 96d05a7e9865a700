"""What drawing a run's figures asks of matplotlib: the work ``herdsim run`` skips (it
costs CPU, not pixels) and the proof that skipping it leaves the picture as it was."""

from __future__ import annotations

import io

import pytest
from matplotlib.axes import Axes

import herdsim
from herdsim.plots.style import save_figure
from herdsim.results.comparison import Comparison
from tests.conftest import tiny


@pytest.fixture(scope="module")
def storm() -> Comparison:
    """A closed pool whose downstream goes down for a second: the timeline has its calls
    row and the success, retries, backlog and down panels; a shared log scale on the
    landing figure."""
    sc = herdsim.load_scenario(tiny(
        duration="5s", workload={"rate": 300}, workers={"count": 40},
        downstream={"outages": [{"start": "1s", "duration": "1s", "mode": "down"}]}))
    return Comparison.from_result(herdsim.run(sc))


def png(figure) -> bytes:
    out = io.BytesIO()
    save_figure(figure, out, "png")
    return out.getvalue()


@pytest.mark.parametrize("kind", ["timeline", "landing"])
def test_titles_are_not_searched_for_a_clear_spot_and_the_picture_is_the_same(
        storm, kind, monkeypatch):
    """matplotlib lifts a title over ticks or an offset text above its axes, measuring
    every y tick label for each title at each layout pass and draw. These figures put
    nothing there: only the timeline's calls rows (titles 3 points above the row, lifted
    clear of it) may search; forcing the search on every axes draws the same bytes."""
    searched: list[Axes] = []
    update = Axes._update_title_position

    def counted(ax, renderer):
        if ax._autotitlepos is not False and any(
                t.get_text() for t in (ax.title, ax._left_title, ax._right_title)):
            searched.append(ax)
        return update(ax, renderer)

    monkeypatch.setattr(Axes, "_update_title_position", counted)
    figure = storm.plot(kind)
    drawn = png(figure)
    rows = [ax for ax in figure.axes if ax.get_title("right").startswith("peak ")]
    assert (kind == "timeline") == bool(rows)  # the calls rows are told apart
    assert set(searched) <= set(rows), [ax.get_title() for ax in set(searched) - set(rows)]
    for ax in figure.axes:
        ax._autotitlepos = True
    assert png(figure) == drawn

"""``coarse.stairs``: matplotlib's ``ax.stairs`` without its per-step limit scan, the same
patch and the same data limits (so the same picture), whatever the steps hold."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.figure import Figure

from herdsim.plots.coarse import stairs

CASES = {
    "filled, baseline": {"baseline": 0.1, "fill": True, "color": "C1", "alpha": 0.45},
    "line, no baseline": {"baseline": None, "color": "C1", "lw": 1.0},
    "default": {},
}


def steps(seed: int, n: int, holes: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = rng.lognormal(1.0, 2.0, n)
    if holes:  # NaN steps split the path
        values[rng.random(n) < 0.1] = np.nan
    edges = np.cumsum(rng.uniform(0.001, 0.02, n + 1)) - 3.0
    return values, edges


def drawn(how, values, edges, kwargs, scale: str) -> tuple[Figure, object, object]:
    fig = Figure(figsize=(6, 3))
    ax = fig.add_subplot()
    ax.set_yscale(scale)
    patch = how(ax, values, edges, **kwargs)
    ax.autoscale_view()
    return fig, ax, patch


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("scale", ["linear", "log"])
@pytest.mark.parametrize(("seed", "n", "holes"), [(1, 1, False), (2, 2, False),
                                                   (3, 500, False), (4, 3000, True)])
def test_stairs_is_matplotlibs_stairs(name, scale, seed, n, holes):
    values, edges = steps(seed, n, holes)
    kwargs = CASES[name]
    fig_a, ax_a, a = drawn(lambda ax, v, e, **k: ax.stairs(v, e, **k), values, edges,
                           kwargs, scale)
    fig_b, ax_b, b = drawn(stairs, values, edges, kwargs, scale)
    path_a, path_b = a.get_path(), b.get_path()
    np.testing.assert_array_equal(path_a.vertices, path_b.vertices)
    np.testing.assert_array_equal(path_a.codes, path_b.codes)
    np.testing.assert_array_equal(ax_a.dataLim.get_points(), ax_b.dataLim.get_points())
    assert ax_a.get_xlim() == ax_b.get_xlim() and ax_a.get_ylim() == ax_b.get_ylim()
    assert a.get_facecolor() == b.get_facecolor() and a.get_edgecolor() == b.get_edgecolor()
    assert a.sticky_edges.y == b.sticky_edges.y
    pictures = []
    for fig in (fig_a, fig_b):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        pictures.append(buffer.getvalue())
    assert pictures[0] == pictures[1]

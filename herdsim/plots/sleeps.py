"""``sleeps``: a histogram of the retry sleeps per arm, with the strategy's theory over it
(the expected count per bin: cdf differences, or a Monte Carlo redraw without a cdf)."""

from __future__ import annotations

import textwrap

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter, MaxNLocator

from herdsim.analysis.theory import binned, expected_counts, simulated_counts, sleep_prev
from herdsim.plots import describe
from herdsim.plots.style import STYLE, WIDE, Arm, Comparison, Figure, arm_styles

THEORY_CDF = "theory (strategy cdf)"


def atoms(sleeps: np.ndarray) -> np.ndarray:
    """The sleeps that carry a point mass: values drawn more than once (a fixed or
    exponential strategy's base·2^k and its cap, an immediate retry's 0); a continuous
    draw repeats no value."""
    values, counts = np.unique(sleeps, return_counts=True)
    return values[counts > 1]


def sleep_edges(sleeps: pd.Series, bins: int = 50) -> np.ndarray:
    """Bins of a round width past the 99.5th percentile of *sleeps*, from 0, or, when
    some sleeps are atoms (:func:`atoms`), shifted so that every atom lies as far from an
    edge as the atoms allow (bins are right-closed like the theory's cdf differences, so
    an atom on an edge would be drawn in the bin below its value): the first bin then
    starts below 0."""
    top = 1.05 * max(float(sleeps.quantile(0.995)) if len(sleeps) else 1.0, 1e-3)
    decade = 10 ** np.floor(np.log10(top / bins))
    width = next(decade * m for m in (1, 2, 2.5, 5, 10) if decade * m * bins >= top)
    shift = 0.0
    points = atoms(sleeps.to_numpy(dtype=float))
    if points.size:  # the middle of the widest gap between the atoms' places in a bin
        places = np.unique(np.mod(points / width, 1.0))
        gaps = np.diff(np.r_[places, places[0] + 1.0])
        widest = int(np.argmax(gaps))
        shift = float(np.mod(places[widest] + gaps[widest] / 2, 1.0)) * width
    first = -1 if shift > 0 else 0
    return shift + width * np.arange(first, np.ceil((top - shift) / width) + 1)


def sleeps(c: Comparison) -> Figure:
    """Histogram of retry sleeps per arm with the strategy's theoretical distribution."""
    arms, styles, names = c.arms, arm_styles(c.arms), describe.short_labels(c.arms)
    cols = min(len(arms), 4)
    nrows = -(-len(arms) // cols)
    with mpl.rc_context(STYLE):
        height = WIDE[1] if nrows <= 2 else 4.2 * nrows  # 16:9 up to 8 arms
        fig = Figure(figsize=(WIDE[0], height), layout="constrained")
        axes = fig.subplots(nrows, cols, squeeze=False).ravel()
        for ax in axes[len(arms):]:
            ax.set_visible(False)
        for ax, arm in zip(axes, arms, strict=False):
            data = c.sleeps[c.sleeps["arm"] == arm.label]
            edges = sleep_edges(data["sleep"])
            ordered = sleep_prev(data, arm.scenario.retry.base)
            if len(ordered) and not ordered["sleep"].gt(0).any():  # nothing to histogram
                ax.set_title(f"{names[arm.label]}\n{len(ordered):,} sleeps", fontsize=14,
                             color=styles[arm.label]["color"])
                ax.text(0.5, 0.5, "every sleep is 0 s:\nretries at once", ha="center",
                        va="center", transform=ax.transAxes, fontsize=13)
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            observed = binned(ordered["sleep"].to_numpy(), edges)
            ax.stairs(observed, edges, fill=True, color=styles[arm.label]["color"],
                      alpha=0.55, label="simulated")
            theory, how = _theory(arm, ordered, edges)
            if theory is not None:
                ax.stairs(theory, edges, color="black", lw=2, label=how)
            else:
                ax.text(0.5, 0.5, how, transform=ax.transAxes, ha="center", fontsize=13)
            hidden = int((ordered["sleep"] > edges[-1]).sum())
            note = f"{len(ordered):,} sleeps" + (f", {hidden:,} > {edges[-1]:g} s not shown"
                                                 if hidden else "")
            if theory is not None and how != THEORY_CDF:
                note += f"\n{how}"
            ax.set_title(_wrapped(f"{names[arm.label]}\n{note}", cols), fontsize=14,
                         color=styles[arm.label]["color"])
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.xaxis.set_major_locator(MaxNLocator(4))  # short labels never overlap
            ax.set_xlabel("sleep before retry (s)")
            ax.set_ylabel(f"sleeps per {edges[1] - edges[0]:g} s bin")
        handles = [Line2D([], [], color="0.5", lw=8, alpha=0.55, label="simulated sleeps"),
                   Line2D([], [], color="black", lw=2, label="theory (expected count)")]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
        pooled = " (all replications)" if c.replications > 1 else ""
        fig.suptitle(describe.heading(c, f"how retry sleeps are spread{pooled}"),
                     fontsize=14, fontweight="normal")
    return fig


def _wrapped(text: str, columns: int, size: float = 14) -> str:
    """*text* with each line wrapped to the width of one of *columns* panels side by side."""
    width = max(16, int(WIDE[0] / columns * 0.9 * 72 / (0.6 * size)))
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


def _theory(arm: Arm, ordered: pd.DataFrame, edges: np.ndarray) -> tuple[np.ndarray | None, str]:
    try:
        strategy = arm.scenario.retry.build()
    except ValueError:
        return None, "strategy not importable here:\nno theory shown"
    if len(ordered) == 0:
        return None, "no retries"
    if callable(getattr(strategy, "cdf", None)):
        return expected_counts(strategy, ordered, edges), THEORY_CDF
    sample = _some_jobs(ordered)
    counts = simulated_counts(strategy, sample, edges, arm.scenario.retry.base)
    if len(sample) == len(ordered):
        return counts, "theory by Monte Carlo (no cdf)"
    return (counts * len(ordered) / len(sample),
            f"theory by Monte Carlo (no cdf; {len(sample):,} sleeps redrawn)")


MONTE_CARLO_SLEEPS = 100_000  # sleeps redrawn for a strategy without a cdf, at most


def _some_jobs(ordered: pd.DataFrame) -> pd.DataFrame:
    """*ordered* (job order, see :func:`sleep_prev`), or beyond :data:`MONTE_CARLO_SLEEPS`
    the sleeps of a fixed-seed random share of its jobs (whole chains, since a job's sleep
    depends on its previous one): the expected histogram scaled up is unbiased, and a
    storm's millions of sleeps are not redrawn one Python call at a time."""
    if len(ordered) <= MONTE_CARLO_SLEEPS:
        return ordered
    keys = ordered["replication"].to_numpy() * (int(ordered["job"].max()) + 1) \
        + ordered["job"].to_numpy()
    jobs = np.unique(keys)
    share = MONTE_CARLO_SLEEPS / len(ordered)
    kept = np.random.default_rng(0).random(len(jobs)) < share
    return ordered[np.isin(keys, jobs[kept])]

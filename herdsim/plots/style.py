"""What every figure shares: the palette, the rc style, 16:9 sizes, the Figure class and the
Protocols a figure reads its data through."""

from __future__ import annotations

import io
import zlib
from typing import Any, Protocol

import matplotlib.figure
import numpy as np
import pandas as pd
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

from herdsim.config.scenario import Scenario

STRATEGY_COLORS = {  # Okabe & Ito (2008), and one of Tol's muted colours
    "fixed": "#CC79A7",  # reddish purple
    "exponential": "#D55E00",  # vermillion
    "full_jitter": "#0072B2",  # blue
    "equal_jitter": "#009E73",  # bluish green
    "decorrelated_jitter": "#56B4E9",  # sky blue
    "decorrelated_jitter_v2": "#E69F00",  # orange
    "proportional_jitter": "#882255",  # wine (Tol)
}
# Tol's muted olive, teal, purple, rose, green; black; a dark brown: far from the built-ins'
# blues (Tol's indigo read as full jitter's blue beside it)
OTHER_COLORS = ("#999933", "#44AA99", "#AA4499", "#CC6677", "#117733", "#000000", "#663333")
SPARE_COLORS = ("#332288", "#EE3377", "#666633")  # Tol's indigo, magenta, a dark olive
MIN_DELTA_E = 25.0  # CIELAB distance (ΔE*ab) two policies' colours keep apart in a figure
LINE_STYLES = ("-", "--", ":", "-.")
CAPACITY_STYLE: dict[str, Any] = {"color": "black", "linestyle": "--", "linewidth": 1.6}
OUTAGE_STYLE = {"color": "0.55", "alpha": 0.3, "linewidth": 0}
# an outage of one replica: the tier serves on, so hatched, not the whole tier's grey
REPLICA_OUTAGE_STYLE = {"facecolor": "none", "edgecolor": "0.5", "hatch": "//",
                        "linewidth": 0, "alpha": 0.6}
WIDE = (16.0, 9.0)  # inches: a 16:9 slide
STYLE: Any = {  # matplotlib rc settings (its stubs want literal keys)
    "font.size": 14,
    "axes.titlesize": 15,
    "axes.titlelocation": "left",
    "axes.labelsize": 14,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "figure.titlesize": 18,
    "figure.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "agg.path.chunksize": 10_000,  # a long jagged line is drawn in pieces, never overflows
}
# Axes made under these settings keep their titles just above them. Otherwise matplotlib
# looks for a clear spot above ticks and offset text on top of the axes, measuring every
# y tick label again for each title at each layout pass and draw (a sixth of a figure's
# time): the timeline and landing figures put nothing there for the search to avoid.
TITLES_IN_PLACE: Any = {"axes.titley": 1.0}


class Arm(Protocol):
    """What a figure needs of an arm (:class:`herdsim.results.comparison.Arm`)."""

    label: str
    strategy: str
    settings: dict[str, Any]
    scenario: Scenario


class Comparison(Protocol):
    """What a figure needs of a comparison (:class:`herdsim.results.comparison.Comparison`)."""

    scenario: Scenario
    arms: list[Any]
    replications: int
    runs: pd.DataFrame
    timeseries: pd.DataFrame
    sleeps: pd.DataFrame
    peaks: pd.DataFrame | None
    crashes: pd.DataFrame | None  # a call graph's: arm, replication, tier, time
    summary: pd.DataFrame  # one row per arm, in the arms' order

    @property
    def varied(self) -> str: ...

    def ranked(self) -> pd.DataFrame: ...

    def missing(self, key: str) -> str: ...

    def context(self, row: pd.Series | None = None) -> dict: ...


class Figure(matplotlib.figure.Figure):
    """A matplotlib Figure that Jupyter displays even when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png")
        return buffer.getvalue()


# Metadata that would differ between two saves of one figure: dates, and the random ids
# of SVG elements (a fixed salt makes them a function of the figure alone).
STABLE_METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None},
                   "png": {}}


# zlib level 3, not 6: a third less CPU to compress a figure for a tenth more bytes
PNG_COMPRESSION = {"compress_level": 3}


def save_figure(figure: matplotlib.figure.Figure, target: Any, fmt: str, **kwargs: Any) -> None:
    """Save *figure* as *fmt* to *target* (a path or a binary stream); one figure gives the
    same bytes every time, in every format."""
    if fmt == "png":
        kwargs.setdefault("pil_kwargs", PNG_COMPRESSION)
    with matplotlib.rc_context({"svg.hashsalt": "herdsim"}):
        figure.savefig(target, format=fmt, metadata=STABLE_METADATA.get(fmt), **kwargs)


SLIDE_ARMS = 5  # up to this many arms a figure stays 16:9; more arms make it taller


def wide_size(arms: int, per_arm: float = 1.2) -> tuple[float, float]:
    """16:9 for up to :data:`SLIDE_ARMS` arms; beyond, *per_arm* inches more per arm."""
    extra = max(0, arms - SLIDE_ARMS) * per_arm
    return WIDE[0], WIDE[1] + extra


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The width in points of one line of *text* at *size* points (no canvas needed)."""
    font = FontProperties(size=size, weight="bold" if bold else "normal")
    return TextToPath().get_text_width_height_descent(text, font, ismath=False)[0]


def fitted(text: str, width: float, size: float, bold: bool = False) -> str:
    """*text*, cut short with ``…`` until it is at most *width* points wide."""
    if text_width(text, size, bold) <= width:
        return text
    while len(text) > 1 and text_width(text + "…", size, bold) > width:
        text = text[:-1]
    return text.rstrip(" ,·") + "…"


def legend_columns(labels: list[str], size: float, width: float = WIDE[0] * 72 * 0.9) -> int:
    """How many columns of *labels* (a legend's, with their handles) fit *width* points."""
    widest = max((text_width(label, size) for label in labels), default=0.0) + 4.5 * size
    return max(1, min(len(labels), 4, int(width // widest)))


def strategy_color(strategy: str) -> str:
    """The fixed colour of a strategy: built-ins by name, others by a hash of the name."""
    name = strategy.rpartition(":")[2] if strategy not in STRATEGY_COLORS else strategy
    if name in STRATEGY_COLORS:
        return STRATEGY_COLORS[name]
    return OTHER_COLORS[zlib.crc32(strategy.encode()) % len(OTHER_COLORS)]


def lab(color: str) -> np.ndarray:
    """``#RRGGBB`` (sRGB) as CIELAB L*, a*, b* under D65."""
    rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str) -> float:
    """The CIELAB distance ΔE*ab of two colours: about 2 is just noticeable, and two
    categories in a figure want :data:`MIN_DELTA_E` or more."""
    return float(np.linalg.norm(lab(a) - lab(b)))


def arm_colors(strategies: list[str | None]) -> dict[int, str]:
    """``position -> colour`` for *strategies* (one entry per arm; None for an arm whose
    policy an earlier arm already has): each policy's own colour (built-ins first), or,
    when it is within :data:`MIN_DELTA_E` of a colour the figure already uses (and for a
    None), the palette's colour farthest from those (the first of equals): twelve arms stay
    told apart (the built-ins are 26 apart)."""
    palette = list(dict.fromkeys([*STRATEGY_COLORS.values(), *OTHER_COLORS, *SPARE_COLORS]))
    colors: dict[int, str] = {}

    def nearest(color: str) -> float:
        return min((delta_e(color, used) for used in colors.values()), default=np.inf)

    def order(i: int) -> tuple[int, int]:
        name = strategies[i]
        return (0 if name in STRATEGY_COLORS else 1 if name is not None else 2), i

    for i in sorted(range(len(strategies)), key=order):
        name = strategies[i]
        color = strategy_color(name) if name is not None else ""
        if not color or nearest(color) < MIN_DELTA_E:
            color = max(palette, key=nearest)
        colors[i] = color
    return colors


def policy(arm: Arm) -> str:
    """What an arm's colour stands for: its library preset, else its strategy."""
    return str(arm.settings.get("retry.preset", arm.strategy))


def arm_styles(arms: list[Arm]) -> dict[str, dict]:
    """``label -> {color, linestyle}``: a colour per arm, distinct within the figure (the
    first arm of each policy, preset or strategy, in that policy's own colour), and a line
    style per varied setting of one policy (a second cue where colour is not seen)."""
    first = [policy(arm) if policy(arm) not in map(policy, arms[:i]) else None
             for i, arm in enumerate(arms)]
    colors = arm_colors(first)
    seen: dict[str, int] = {}
    styles = {}
    for i, arm in enumerate(arms):
        k = seen[policy(arm)] = seen.get(policy(arm), -1) + 1
        styles[arm.label] = {"color": colors[i],
                             "linestyle": LINE_STYLES[k % len(LINE_STYLES)]}
    return styles


def one(frame: pd.DataFrame, label: str, replication: int = 0) -> pd.DataFrame:
    """The rows of *frame* for one arm and replication."""
    return frame[(frame["arm"] == label) & (frame["replication"] == replication)]


def shade_outages(ax, scenario, shift: float = 0.0) -> None:
    """Grey spans over *scenario*'s outages of a whole tier, hatched ones over those of
    one replica (moved by *shift* seconds)."""
    for outage in scenario.all_outages:
        style = OUTAGE_STYLE if outage.replica is None else REPLICA_OUTAGE_STYLE
        ax.axvspan(outage.start - shift, outage.end - shift, **style)


def outage_key(scenario) -> str:
    """What the shading of :func:`shade_outages` means, for a figure's caption ("" without
    an outage)."""
    whole = any(o.replica is None for o in scenario.all_outages)
    hit = sorted({o.replica for o in scenario.all_outages if o.replica is not None})
    parts = ["grey: outage"] if whole else []
    if hit:
        which = ", ".join(str(r) for r in hit)
        parts.append(f"hatched: replica{'s' if len(hit) > 1 else ''} {which} out")
    return "".join(f"; {part}" for part in parts)

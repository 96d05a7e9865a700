"""The timeline's hit-rate panels: one per cache in the run (the workers' downstream's,
then each service's), each arm's hit rate per bin (:mod:`herdsim.analysis.cache`)."""

from __future__ import annotations

import pandas as pd

from herdsim.analysis import cache

PANEL = "cache:"  # a panel key: "cache:" + the columns' prefix ("" or "<service>_")


def keys(ts: pd.DataFrame) -> list[str]:
    """The panel keys of the caches whose columns *ts* holds."""
    return [PANEL + column[: -len(cache.HIT)] for column in ts.columns
            if column.endswith(cache.HIT)]


def draw(ax, key: str, ts: pd.DataFrame, width: float, line: dict) -> None:
    """One arm's hit rate per bin (a gap where no request came)."""
    prefix = key[len(PANEL):]
    rate = cache.hit_rate(ts[prefix + cache.HIT].to_numpy(), ts[prefix + cache.MISS].to_numpy())
    ax.plot(ts["time"] + width / 2, rate, **line)


def label(ax, key: str, bin_text: str) -> None:
    """Title and axis: a fraction from 0 to 1."""
    prefix = key[len(PANEL):]
    whose = f"{prefix[:-1]}'s cache" if prefix else "Cache"
    ax.set_title(f"{whose}: hit rate (hits over requests per {bin_text} bin)", fontsize=13)
    ax.set_ylabel("hit rate")
    ax.set_ylim(0, 1.05)

"""The timeline's panels of a call graph's degrading services: each one's factor on its
service time at every bin start (``<service>_degradation``, from
``services.<name>.degradation``); the workers' downstream's factor is the timeline's own
``degradation`` panel."""

from __future__ import annotations

import pandas as pd

PANEL = "degradation:"  # a panel key: "degradation:" + the service's name
SUFFIX = "_degradation"


def keys(ts: pd.DataFrame) -> list[str]:
    """The panel keys of the services whose factor *ts* holds and rose above 1."""
    return [PANEL + column[: -len(SUFFIX)] for column in ts.columns
            if column.endswith(SUFFIX) and bool(ts[column].gt(1).any())]


def draw(ax, key: str, ts: pd.DataFrame, line: dict) -> None:
    """One arm's factor at each bin start."""
    column = key[len(PANEL):] + SUFFIX
    if ts[column].notna().any():
        ax.plot(ts["time"], ts[column], **line)


def label(ax, key: str) -> None:
    """Title and axis: a factor from 1 up."""
    name = key[len(PANEL):]
    ax.set_title(f"{name}'s degradation: the factor on the service time "
                 f"(services.{name}.degradation, at each bin start)", fontsize=13)
    ax.set_ylabel("× service")

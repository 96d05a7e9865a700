"""``report.html``: a self-contained page a design reviewer can act on (see :mod:`.page`)."""

from __future__ import annotations

from pathlib import Path

from herdsim.outputs.atomic import write_file
from herdsim.outputs.report.page import render, render_sweep

__all__ = ["render", "render_sweep", "write_report", "write_sweep_report"]


def write_report(directory: str | Path, comparison, fresh: bool = False) -> Path:
    """Write ``report.html`` of *comparison* into its output *directory* (atomically);
    *fresh*: the directory's PNGs were just drawn from *comparison* (reused, not redrawn)."""
    target = Path(directory) / "report.html"
    write_file(target, render(comparison, Path(directory), fresh=fresh))
    return target


def write_sweep_report(directory: str | Path) -> Path:
    """Write ``report.html`` of the finished sweep in *directory* (atomically)."""
    from herdsim.outputs.sweep_dir import load_sweep

    runs, manifest = load_sweep(directory)
    target = Path(directory) / "report.html"
    write_file(target, render_sweep(runs, manifest, Path(directory)))
    return target

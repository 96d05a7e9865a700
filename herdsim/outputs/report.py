"""One self-contained ``report.html`` for a run or comparison directory.

The scenario (as YAML), the ranked KPI table and the figures (PNG, base64-embedded) in a
single file with no external reference, ready to attach to a design review.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

from herdsim.outputs.atomic import sealed, write_file
from herdsim.plots.figures import FIGURES
from herdsim.results.comparison import Comparison

CAPTIONS = {
    "timeline": "Downstream calls, retries, backlog and downstream state over time",
    "sleeps": "Retry sleeps drawn, against the strategy's theoretical distribution",
    "kpis": "Key numbers per arm",
}
CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 0.95em; }
th, td { padding: 0.3em 0.7em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child, td:nth-child(2) { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
"""


def _png(directory: Path | None, comparison: Comparison, kind: str) -> bytes:
    """The figure's PNG: the one saved in *directory* when it is still the one written with
    the data (see :func:`~herdsim.outputs.atomic.sealed`), else drawn now."""
    if directory is not None and sealed(directory, f"{kind}.png"):
        return (directory / f"{kind}.png").read_bytes()
    buffer = io.BytesIO()
    comparison.plot(kind).savefig(buffer, format="png")
    return buffer.getvalue()


def render(comparison: Comparison, directory: Path | None = None) -> str:
    """The report of *comparison* as one HTML string (figures saved in *directory* reused)."""
    sc = comparison.scenario
    n = len(comparison.arms)
    arms = f"{n} arms varying {comparison.varied}" if n > 1 else comparison.varied
    figures = []
    for kind in FIGURES:
        data = base64.b64encode(_png(directory, comparison, kind)).decode("ascii")
        figures.append(f'<h2>{html.escape(CAPTIONS[kind])}</h2>\n'
                       f'<img alt="{kind}" src="data:image/png;base64,{data}">')
    title = f"herdsim report: {sc.name}"
    return "\n".join([
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(sc.description.strip())}</p>" if sc.description.strip() else "",
        f"<p>{html.escape(arms)}; replications per arm: {comparison.replications} "
        f"(seeds {sc.seed}…{sc.seed + comparison.replications - 1}, common to all arms). "
        f"Generated {datetime.now():%Y-%m-%d %H:%M} by herdsim {version('herdsim')}.</p>",
        "<h2>Key numbers, best arm first</h2>",
        "<p>Mean ± 95% confidence interval over replications; ranked by recovery time "
        "(never-recovered last), then peak call rate over capacity.</p>",
        comparison.table().to_html(border=0, index_names=False),
        *figures,
        "<h2>Scenario</h2>",
        f"<pre>{html.escape(sc.to_yaml())}</pre>",
        "</body></html>",
    ])


def write_report(directory: str | Path, comparison: Comparison) -> Path:
    """Write ``report.html`` of *comparison* into its output *directory* (atomically)."""
    target = Path(directory) / "report.html"
    write_file(target, render(comparison, Path(directory)))
    return target

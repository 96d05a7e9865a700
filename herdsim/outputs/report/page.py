"""One self-contained ``report.html`` for a run, comparison or sweep directory.

The verdict, the KPI table, the interactive timeline, the figures (PNG, base64-embedded),
a glossary from the KPI registry and the scenario as written, in one file that loads
nothing (a Content-Security-Policy forbids every request) and prints cleanly.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd

from herdsim.analysis import metastability
from herdsim.analysis.kpis import (
    BOUNDS_NOTE,
    BY_KEY,
    NA,
    TIER_BY_KEY,
    TIER_REGISTRY,
    format_kpi,
    on,
)
from herdsim.analysis.metastability import NOT_RECOVERED, RANK_RULE, state_text
from herdsim.config import files
from herdsim.config.loading import load_scenario
from herdsim.outputs.atomic import sealed
from herdsim.outputs.report import classes, interactive, replicas
from herdsim.outputs.report.verdict import arm_stats, assumptions, states, ties, verdict
from herdsim.plots import describe
from herdsim.plots.figures import FIGURES
from herdsim.plots.kinds import applies
from herdsim.plots.metastability_map import plot_map
from herdsim.policies.durations import format_duration

CAPTIONS = {
    "timeline": "Downstream calls, successes, retries, backlog and downstream state over time",
    "landing": "When the retries land, per 10 ms, aligned at the outage's end",
    "sleeps": "Retry sleeps drawn, against the strategy's theoretical distribution",
    "kpis": "Key numbers per arm",
    "graph": "The call graph: each tier coloured by its state, each edge by what a call "
             "carries",
    "map": "Metastability map: the class of every cell of the sweep",
}
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")
CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; font-size: 0.95em; margin: 0.5em 0 1em;
        display: block; max-width: 100%; overflow-x: auto; }  /* wide: scrolls, not the page */
th, td { padding: 0.3em 0.7em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; }
table.kpis { display: table; }  /* a few columns each: wraps, never scrolls out of sight */
table.kpis caption { text-align: left; font-weight: 600; padding: 0.2em 0; }
table.kpis th { vertical-align: bottom; }
table.kpis td.text { overflow-wrap: break-word; }
img, canvas { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
.verdict { background: #f3f7fb; border-left: 4px solid #0072B2; padding: 0.6em 1em; }
.note { color: #555; font-size: 0.92em; }
dl.glossary dt { font-weight: 600; margin-top: 0.4em; }
dl.glossary dd { margin-left: 1.5em; }
button { font: inherit; }
@media print {
  body { max-width: none; margin: 0; font-size: 10.5pt; }
  .controls, #hs-readout, #explore .note { display: none; }
  figure, table, .verdict, canvas { break-inside: avoid; }
  h2 { break-after: avoid; }
  section.figure { break-before: page; }
  pre { white-space: pre-wrap; }
  table { display: table; font-size: 8.5pt; }
}
"""
def _png(directory: Path | None, figure_of, kind: str, fresh: bool = False) -> bytes:
    """The figure's PNG: the one saved in *directory* when it is still the one written with
    the data (see :func:`~herdsim.outputs.atomic.sealed`), or, *fresh*, just drawn there
    from this comparison (a directory being written); else drawn now."""
    if directory is not None:
        saved = directory / f"{kind}.png"
        if sealed(directory, saved.name) or fresh and saved.is_file():
            return files.read_bytes(saved)
    buffer = io.BytesIO()
    figure_of(kind).savefig(buffer, format="png")
    return buffer.getvalue()


def _figure(kind: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<section class="figure"><h2>{html.escape(CAPTIONS[kind])}</h2>\n'
            f'<img alt="{kind}" src="data:image/png;base64,{data}"></section>')


def _page(title: str, body: list[str]) -> str:
    return "\n".join([
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>", *body, "</body></html>"])


GROUPS = ("outcome", "load on the downstream", "latency")  # the report panels' groups, in
# this order: the key numbers in narrow tables, so none scrolls out of sight or print


def _kpi_table(c) -> tuple[str, list[str]]:
    """The per-arm key numbers: the KPIs with a report panel, one narrow table per group
    of :data:`GROUPS` (a panel of no listed group: the first), arms in the comparison's
    ranking in each, every value as every surface shows it; with the keys shown."""
    ranked = c.ranked()
    st = states(c)
    shown = [kpi for kpi in on("report") if kpi.key in ranked
             and not all(c.shown(kpi.key, row).startswith(NA) for _, row in ranked.iterrows())]
    keys = [kpi.key for kpi in shown]
    share = BY_KEY["succeeded_fraction"]
    best = (ties(arm_stats(c, share.key), share.better or "higher") if c.replications > 1
            else [])
    window = {"peak_window": c.scenario.peak_window}
    group_of = {kpi.key: kpi.panels["report"].group if kpi.panels["report"].group in GROUPS
                else GROUPS[0] for kpi in shown}
    grouped = {name: [k for k in keys if group_of[k] == name] for name in GROUPS}
    tables = []
    for group, members in ((g, m) for g, m in grouped.items() if m):
        first = group == "outcome"
        head = ["arm"] + ["state"] * first + [heading(k, window) for k in members]
        meanings = [""] + [BY_KEY["state"].meaning] * first + [BY_KEY[k].about(window)
                                                                for k in members]
        rows = []
        for _, row in ranked.iterrows():
            label = row["arm"]
            tied = first and label in best and len(best) > 1
            cells = [f'<td class="text">{html.escape(label)}'
                     + (" (tied best on succeeded)" if tied else "") + "</td>"]
            if first:
                cells.append(f'<td class="text">{html.escape(state_text(st[label]))}</td>')
            for key in members:
                ci = row.get(f"{key}_ci95", np.nan)
                shown = c.shown(key, row, np.nan if ci is None else ci)
                cells.append(f"<td>{html.escape(shown)}</td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        tables.append(  # the registry's definition on hover
            f'<table class="kpis"><caption>{html.escape(group.capitalize())}</caption><thead>'
            "<tr>" + "".join(f'<th title="{html.escape(m)}">{html.escape(h)}</th>'
                             for h, m in zip(head, meanings, strict=True))
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    return "".join(tables), ["state"] + keys


def _verdict(c) -> str:
    """The verdict: its lead line, one item per arm, then the assumptions."""
    lead, *lines = verdict(c)
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    assumed = "".join(f"<li>{html.escape(line)}</li>" for line in assumptions(c))
    return (f'<div class="verdict"><p>{html.escape(lead)}</p><ul>{items}</ul>'
            f"<p>It depends on these assumptions:</p><ul>{assumed}</ul></div>")


def heading(key: str, summary: dict | None = None) -> str:
    """A report column's heading: the registry's label (its peak window from *summary*)
    and unit."""
    kpi = BY_KEY[key]
    unit = "" if not kpi.unit or kpi.kind == "fraction" else f" ({kpi.unit})"
    return kpi.title(summary) + unit


def _narrow_tables(frame: pd.DataFrame, keep: list[str], width: int = 5) -> str:
    """*frame* as tables of at most *width* columns besides *keep* (repeated in each),
    which wrap instead of scrolling out of sight or print."""
    rest = [col for col in frame.columns if col not in keep]
    return "".join(frame[keep + rest[i:i + width]].to_html(border=0, index=False,
                                                            classes="kpis")
                   for i in range(0, len(rest), width))


def tier_section(c) -> str:
    """A call graph's numbers per arm and tier (the mean over replications), with their
    meanings; empty for a single-tier run."""
    columns = [col for col in c.summary.columns if col.startswith("tiers.")
               and col.count(".") == 2 and col.rsplit(".", 1)[1] in TIER_BY_KEY]
    if not columns:
        return ""
    rows = []
    # a column no tier has (a cache's, where no tier has a cache) would only read n/a
    present = {col.rsplit(".", 1)[1] for col in columns}
    kpis = [kpi for kpi in on("report", TIER_REGISTRY) if kpi.key in present]
    for _, arm in c.summary.iterrows():
        names = dict.fromkeys(col.split(".")[1] for col in columns)
        for name in names:
            headline = " (headline)" if name == arm.get("headline_tier") else ""
            row = {"arm": arm["arm"], "tier": name + headline}
            for kpi in kpis:
                value = arm.get(f"tiers.{name}.{kpi.key}")
                if f"tiers.{name}.{kpi.key}" not in c.summary.columns:  # not this tier's
                    row[kpi.label] = NA
                elif value is None or pd.isna(value):
                    row[kpi.label] = (kpi.missing if not kpi.unreached
                                      or c.scenario.all_outages else None) or NA
                else:
                    row[kpi.label] = value if kpi.kind == "text" else format_kpi(float(value))
            rows.append(row)
    meanings = "".join(f"<dt>{html.escape(k.label)} <code>{html.escape(k.key)}</code></dt>"
                       f"<dd>{html.escape(k.meaning)}</dd>" for k in kpis)
    return ("<h2>Per tier</h2><p class='note'>Each service of the call graph (summary.json's "
            "<code>tiers</code>), the mean over replications; the state, the class of "
            "most replications. An arm's headline (its state, recovery, crashes and peak "
            "in the tables above) is its headline tier's: the worst state, then the most "
            "collapses, then the highest peak over capacity.</p>"
            + _narrow_tables(pd.DataFrame(rows), ["arm", "tier"])
            + f'<dl class="glossary">{meanings}</dl>')


def glossary(keys: list[str], summary: dict | None = None) -> str:
    """Each shown KPI's label, unit and meaning, from the KPI registry (the peak window
    from *summary*)."""
    items = []
    for key in keys:
        kpi = BY_KEY.get(key)
        if kpi is None:
            continue
        label, unit, meaning = kpi.title(summary), kpi.unit, kpi.about(summary) + kpi.details
        unit_text = f" ({unit})" if unit else ""
        items.append(f"<dt>{html.escape(label)}{html.escape(unit_text)} "
                     f"<code>{html.escape(key)}</code></dt><dd>{html.escape(meaning)}</dd>")
    return '<dl class="glossary">' + "".join(items) + "</dl>"


def scenario_section(sc) -> str:
    """The scenario as written: only non-default fields, durations with units."""
    text = describe.written_yaml(sc)
    changed = describe.overrides(sc)
    note = ("<p>Changed by <code>--set</code>: "
            + html.escape(", ".join(changed)) + ".</p>") if changed else ""
    return ("<h2>Scenario as written</h2><p class='note'>Only the fields that differ from "
            "the schema's defaults; durations with their units (docs/scenarios.md has "
            f"every field).</p>{note}<pre>{html.escape(text)}</pre>")


def _seeds(seed: int, reps: int, arms: int) -> str:
    if reps == 1:
        return f"seed {seed}" + (", common to all arms" if arms > 1 else "")
    common = ", common to all arms" if arms > 1 else ""
    return f"replications per arm: {reps} (seeds {seed}…{seed + reps - 1}{common})"


def render(comparison, directory: Path | None = None, kinds: tuple[str, ...] = FIGURES,
           fresh: bool = False) -> str:
    """The report of *comparison* as one HTML string with figures *kinds* (those saved in
    *directory* reused; *fresh*: that directory's PNGs were just drawn from *comparison*,
    before its checksums are written)."""
    c, sc = comparison, comparison.scenario
    n, reps = len(c.arms), c.replications
    arms = f"{n} arms varying {c.varied}" if n > 1 else f"one run ({c.arms[0].label})"
    arms += c.interrupted
    table, keys = _kpi_table(c)
    if c.predicted:
        how = (f"Predicted by the {c.predicted} (herdsim predict), not simulated: mean "
               "amounts, one value per KPI and no interval; the peak is the level random "
               "bunching crosses with even odds over the mean flow's (docs/predict.md). "
               "Simulate it with <code>herdsim compare SCENARIO --replications 5</code>.")
    elif reps > 1:
        how = (f"Mean ± 95% Student-t interval over {reps} replications per arm; arms whose "
               f"intervals overlap are ties. Arms are {html.escape(RANK_RULE)}.")
    else:
        how = ("One replication per arm: single values and no intervals, so an order decided "
               "by a small difference may be noise; rerun with <code>--replications 5</code> "
               f"for intervals and ties. Arms are {html.escape(RANK_RULE)}.")
    if not c.predicted:  # a fluid has no jobs, so no latency
        how += " Latency: " + html.escape(BOUNDS_NOTE) + "."
    body = [
        f"<p>{html.escape(sc.description.strip())}</p>" if sc.description.strip() else "",
        f"<p class='note'>{html.escape(arms)}; "
        f"{'no random draw' if c.predicted else _seeds(sc.seed, reps, n)}. "
        f"{html.escape(describe.facts(sc, n == 1))}."
        f" Generated {datetime.now():%Y-%m-%d %H:%M} by herdsim {version('herdsim')}.</p>",
        "<h2>Verdict</h2>",
        _verdict(c),
        "<h2>Key numbers</h2>", f"<p class='note'>{how}</p>", table,
        tier_section(c),
        replicas.section(c),
        classes.section(c),
        "" if c.predicted else interactive.section(c),  # it shows sleeps: a fluid has none
        *(_figure(kind, _png(directory, c.plot, kind, fresh)) for kind in kinds
          if applies(kind, sc) and kind in c.drawable),
        "<h2>Glossary</h2>", glossary(keys, {"peak_window": sc.peak_window}),
        scenario_section(sc),
    ]
    return _page(f"herdsim report: {sc.name}"
                 + (f" — predicted ({c.predicted})" if c.predicted else ""), body)


def render_sweep(runs: pd.DataFrame, manifest: dict, directory: Path | None = None) -> str:
    """The report of a finished sweep: its map, the class counts and every cell."""
    axes = [a["path"] for a in manifest["axes"]]
    cells = metastability.cells(runs, axes)
    counts = pd.crosstab(cells["strategy"], cells["class"]).reindex(
        index=manifest["strategies"], columns=list(metastability.CLASSES), fill_value=0)
    lines = []
    total = len(cells) // max(1, len(manifest["strategies"]))
    for strategy, row in counts.iterrows():
        lines.append(f"{strategy} recovers in {row['recovered']} of {total} cells, is "
                     f"degraded in {row['degraded']} and metastable in {row['metastable']}")
    shown = cells.assign(recovery_time=[
        NOT_RECOVERED if pd.isna(v) else f"{v:.3g}" for v in cells["recovery_time"]])
    for axis in manifest["axes"]:
        if axis.get("unit") == "s":
            shown[axis["path"]] = [format_duration(float(v)) for v in shown[axis["path"]]]
        else:
            shown[axis["path"]] = [f"{v:g}" if isinstance(v, float) else str(v)
                                   for v in shown[axis["path"]]]
    reps = manifest.get("replications", 1)
    note = ("One replication per cell: rerun with --replications 3 or more to see how often "
            "a cell's class holds." if reps < 2 else
            f"{reps} replications per cell; a cell takes the class of most of its runs "
            "(agree/runs), ties going to the worse class.")
    body = [
        "<h2>Verdict</h2>",
        '<p class="verdict">' + html.escape("; ".join(lines)) + ".</p>",
        f"<p class='note'>{html.escape(note)} The recovery time shown is the median over "
        "the cell's runs that recovered.</p>",
        _figure("map", _png(directory, lambda _: plot_map(runs, manifest), "map")),
        "<h2>Cells per class</h2>", counts.to_html(border=0),
        "<h2>Every cell</h2>", shown.to_html(border=0, index=False),
        "<h2>Glossary</h2>", glossary(["state", "recovery_time", "collapses_after_outage"]),
    ]
    scenario = manifest.get("scenario")
    name = "sweep"
    if isinstance(scenario, dict):
        base = load_scenario(scenario, trust_code=False, sealed=True)
        name = base.name
        body.append(scenario_section(base).replace("Scenario as written",
                                                   "Base scenario as written"))
    return _page(f"herdsim sweep report: {name}", body)

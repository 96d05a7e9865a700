"""Rich tables of a run's summary and a comparison's ranking, from the KPI registry."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from rich import box
from rich.markup import escape
from rich.table import Table

from herdsim.analysis.kpis import (
    BOUNDS_NOTE,
    BY_KEY,
    KPI,
    TIER_REGISTRY,
    number_text,
    on,
    undefined,
)
from herdsim.analysis.metastability import NOT_RECOVERED
from herdsim.cli.app import safe
from herdsim.results.comparison import RANK_RULE, Comparison

STATE_STYLE = {"recovered": "green", "degraded": "yellow", "metastable": "bold red"}


def summary_table(summary: dict, title: str, marks: dict[str, str] | None = None,
                  notes: Sequence[str] = ()) -> Table:
    """The run summary: one row per KPI of the registry's run table (state first); a KPI
    in *marks* has its mark after its label, and *notes* go first in the caption."""
    table = Table(title=safe(title), show_header=True, header_style="bold")
    table.add_column("KPI")
    table.add_column("value", justify="right")
    table.add_column("unit")
    tier = summary.get("headline_tier")
    for kpi in (kpi for kpi in on("run") if kpi.listed(summary)):
        value = summary[kpi.key]
        shown = _styled(kpi, value, escape(kpi.show(value, summary)), summary)
        label = kpi.title(summary)
        if tier and kpi.headline:
            label = f"{label} [bold]({safe(tier)})[/]"
        label += (marks or {}).get(kpi.key, "")
        table.add_row(label, shown, "" if undefined(value) else kpi.unit)
    notes = [*notes, *([f"latency {BOUNDS_NOTE}"] if summary.get("latency_censored") else [])]
    if tier:
        notes.insert(0, f"({safe(tier)}): the headline tier's, the worst of the "
                        f"{len(summary['tiers'])} tiers (worst state, then most collapses, "
                        "then highest peak/capacity); the rest: the workers' view, their "
                        f"jobs and their calls to {safe(next(iter(summary['tiers'])))}")
    table.caption = "; ".join([*notes, DEFINITIONS_HINT])
    return table


DEFINITIONS_HINT = "each KPI's definition: --explain, or herdsim kpis"


def _styled(kpi: KPI, value, text: str, summary: dict) -> str:
    """*text* (*value* shown, escaped) coloured: a class by its colour, an unreached
    value (not recovered after an outage) in red."""
    if kpi.classes and value in STATE_STYLE:
        return f"[{STATE_STYLE[value]}]{text}[/]"
    if kpi.unreached and undefined(value) and kpi.applies(summary):
        return f"[red]{text}[/]"
    return text


def tier_table(summary: dict, width: int | None = None) -> Table | None:
    """A call graph's tiers, top first: one row each, a column per tier KPI of
    the tier registry's table (summary.json's ``tiers``); None for a single-tier run. The
    last columns are left out (and said so) when *width* cannot hold them unbroken."""
    tiers = summary.get("tiers")
    if not tiers:
        return None
    # a column no tier has (a cache's, where no tier has a cache) would only read n/a
    kpis = [kpi for kpi in on("run", TIER_REGISTRY) if any(kpi.key in row for row in
                                                            tiers.values())]
    headers = {kpi.key: f"{kpi.label} {kpi.unit if len(kpi.unit) <= 2 else ''}".strip()
               for kpi in kpis}  # ×, s: a long unit is the caption's
    cells = {kpi.key: [_tier_cell(kpi, row, summary) for row in tiers.values()]
             for kpi in kpis}
    names = [safe(name) + (" *" if name == summary.get("headline_tier") else "")
             for name in tiers]
    frame = pd.DataFrame({"tier": names, **{headers[k.key]: cells[k.key] for k in kpis}})
    dropped: list[str] = []
    while width is not None and len(frame.columns) > 3 and _needed(frame, 3) > width:
        dropped.insert(0, frame.columns[-1])
        frame = frame.drop(columns=frame.columns[-1])
    kpis = kpis[:len(frame.columns) - 1]
    table = Table(title="per tier (summary.json's tiers)", show_header=True,
                  header_style="bold")
    table.add_column("tier", no_wrap=True)  # "downstream *" on one line
    for kpi in kpis:  # fitted to *width*: never "…", a word cut would hide a state or digit
        table.add_column(headers[kpi.key].replace(" ", "\n") if width else headers[kpi.key],
                         no_wrap=width is not None or bool(kpi.unreached),
                         justify="left" if kpi.kind == "text" else "right")
    for index, name in enumerate(names):
        table.add_row(name, *(_state_styled(kpi, cells[kpi.key][index]) for kpi in kpis))
    notes = ["* the headline tier"] if summary.get("headline_tier") else []
    notes += [f"{kpi.label}: {kpi.unit}" for kpi in kpis if len(kpi.unit) > 2]  # (header)
    if any(kpi.key in row and undefined(row[kpi.key]) and kpi.unreached
           and kpi.applies(summary) for row in tiers.values() for kpi in kpis):
        notes.append(f"not recovered = {NOT_RECOVERED}")
    if dropped:
        notes.append(f"not shown for width: {', '.join(dropped)} (see summary.json)")
    table.caption = "; ".join(notes)
    return table


def _tier_cell(kpi: KPI, row: dict, summary: dict) -> str:
    """One tier's *kpi* as printed (plain text: the table's width is measured on it)."""
    value = row.get(kpi.key)
    if kpi.key not in row:  # not this tier's KPI (a cache's, on a tier without one)
        return "n/a"
    if undefined(value) and kpi.unreached:
        return kpi.unreached if kpi.applies(summary) else "n/a"
    if value is None or undefined(value):
        return kpi.missing or "n/a"
    return str(value) if kpi.classes else number_text(value)


def _state_styled(kpi: KPI, text: str) -> str:
    """A cell escaped, a state in its colour."""
    if kpi.classes and text in STATE_STYLE:
        return f"[{STATE_STYLE[text]}]{escape(text)}[/]"
    return escape(text)


def shown_keys(summary: dict) -> list[str]:
    """The registry keys :func:`summary_table` shows for *summary*, in its order."""
    return [kpi.key for kpi in on("run") if kpi.listed(summary)]


def compare_keys(comparison: Comparison) -> list[str]:
    """The registry keys of the ranked table's columns (state, succeeded share, ...)."""
    return list(comparison.columns())


def definitions(keys: list[str], summary: dict | None = None) -> Table:
    """The registry's definition of each of *keys* (the window filled in from *summary*):
    what ``--explain`` prints under a table and ``herdsim kpis`` lists."""
    table = Table(title="Definitions (herdsim.analysis.kpis)", show_header=True,
                  header_style="bold", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("KPI", no_wrap=True)
    table.add_column("better", no_wrap=True)
    table.add_column("definition", ratio=1)
    for key in keys:
        kpi = BY_KEY[key]
        table.add_row(key, kpi.better or "—", escape(kpi.definition(summary)))
    return table


def ranked_table(comparison: Comparison, width: int | None = None) -> Table:
    """The comparison's arms, best first, with the registry's comparison columns; the
    least important ones are left out (and said so) when *width* cannot hold them."""
    wide = [comparison.heading(kpi.panels["compare"].heading) for kpi in on("compare")
            if kpi.panels["compare"].wide]  # summary.csv has them; a terminal has no room
    frame = comparison.table().drop(columns=wide, errors="ignore")
    frame = frame.loc[:, [not column.str.startswith("n/a").all() or name == "arm"
                          for name, column in frame.items()]]  # n/a for every arm: no news
    dropped: list[str] = []
    while width is not None and len(frame.columns) > 3 and _needed(frame) > width:
        dropped.insert(0, frame.columns[-1])
        frame = frame.drop(columns=frame.columns[-1])
    return _ranked(comparison, frame, dropped)


def _needed(frame, gap: int = 2) -> int:
    """Columns the table needs: its unbreakable cells (``arm`` up to 20) and *gap* a
    column of padding and rule (3 in a boxed table)."""
    def widest(name: str, values) -> int:
        words = [name.replace(" ", "\n"), *(_cell(v) for v in values)]
        return max(len(line) for text in words for line in text.split("\n"))
    columns = [min(20, widest(name, frame[name])) if name == "arm" else widest(name, frame[name])
               for name in frame.columns]
    return 2 + sum(columns) + gap * len(columns)


def _cell(value: str) -> str:
    """A ranked-table cell as printed: ± on its own line, ``not recovered`` for a recovery
    not reached within the run (the caption says so), never wrapped word by word."""
    if value == NOT_RECOVERED:
        return "not recovered"
    return value.replace(" ±", "\n±")


def _ranked(comparison: Comparison, frame, dropped: list[str]) -> Table:
    reps = comparison.replications
    notes = [RANK_RULE]
    notes.append("± = 95% confidence interval" if reps > 1 else
                 "one replication: no interval, small differences may be noise "
                 "(use --replications)")
    if frame.map(lambda v: v.startswith("≥") or "–" in v).any().any():
        notes.append(f"latency {BOUNDS_NOTE}")
    if frame.map(lambda v: v == NOT_RECOVERED).any().any():
        notes.append(f"not recovered = {NOT_RECOVERED}")
    if "tier" in frame.columns:
        notes.insert(0, "a call graph's state, recovery, peaks and crashes: its tier's, the "
                        "worst (worst state, then most collapses, then highest peak/capacity)")
    if dropped:
        notes.append(f"not shown for width: {', '.join(dropped)} (see summary.csv)")
    notes.append(DEFINITIONS_HINT)
    table = Table(title=f"{safe(comparison.scenario.name)}: {len(comparison.arms)} arms "
                        f"varying {safe(comparison.varied)}, "
                        f"{reps} replication{'s' * (reps > 1)} each"
                        f"{safe(comparison.interrupted)}",
                  caption="; ".join(notes), header_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("arm", overflow="fold", min_width=11)
    for column in frame.columns[1:]:  # never "…": a hidden digit would mislead
        table.add_column(column.replace(" ", "\n"), justify="right", no_wrap=True)
    kpis = {comparison.heading(kpi.panels["compare"].heading): kpi for kpi in on("compare")}
    for rank, row in frame.iterrows():
        cells = [safe(row["arm"])]
        for column, value in row.items():
            if column == "arm":
                continue
            text = escape(_cell(value))
            kpi = kpis[column]
            if kpi.classes and value in STATE_STYLE:
                text = f"[{STATE_STYLE[value]}]{text}[/]"
            elif kpi.unreached and value.startswith(kpi.unreached):
                text = f"[red]{text}[/]"
            cells.append(text)
        table.add_row(str(rank), *cells)
    return table

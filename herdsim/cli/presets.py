"""``herdsim presets``: the retry policies of the libraries people run, and where each
was read."""

from __future__ import annotations

from typing import Annotated

import typer
import yaml
from rich import box
from rich.table import Table
from rich.text import Text

from herdsim.cli import complete
from herdsim.cli.app import app, console
from herdsim.errors import UsageError
from herdsim.policies import presets as table
from herdsim.policies.durations import format_duration


def _mode(preset: table.Preset) -> str:
    if preset.mode == "sleep":
        return "sleep (holds the job)"
    poll = format_duration(preset.fields["workers.poll_interval"])
    return f"requeue (poller {poll})"


def _defaults(preset: table.Preset) -> str:
    """The fields in one line: ``strategy full_jitter, base 1s, cap 20s, ...``."""
    f = preset.fields

    def seconds(value: float) -> str:
        return "none" if value >= table.NO_CAP else format_duration(value)

    retries = f["retry.max_retries"]
    parts = [f"strategy {f['retry.strategy']}", f"base {seconds(f['retry.base'])}",
             f"cap {seconds(f['retry.cap'])}",
             f"max_retries {'unlimited' if retries is None else retries}"]
    parts += [f"{key} {value}" for key, value in f["retry.params"].items()]
    if "retry.throttling_base" in f:
        parts.append(f"throttling_base {seconds(f['retry.throttling_base'])}")
    if f["retry.retry_after"] != "ignore":
        parts.append(f"retry_after {f['retry.retry_after']}")
    if "retry.retry_after_limit" in f:
        parts.append(f"retry_after_limit {seconds(f['retry.retry_after_limit'])}")
    if "workers.attempt_overhead" in f:
        parts.append(f"attempt_overhead {format_duration(f['workers.attempt_overhead'])}")
    if f["breaker"].get("enabled"):
        parts.append("breaker on")
    if f["budget"]:
        kind = f["budget"]["kind"]
        parts.append(f"budget {kind}" + (f"/{f['budget']['preset']}" if "preset" in f["budget"]
                                         else ""))
    if f.get("retry.bucket"):
        parts.append(f"retry bucket {f['retry.bucket']['rate']:g}/s, burst "
                     f"{f['retry.bucket']['burst']}")
    if f.get("workers.autoscale"):
        scale = f["workers.autoscale"]
        parts.append(f"workers {f['workers.count']}..{scale['max']} autoscaled on "
                     f"{scale['metric']}, {scale['step_limit']} per "
                     f"{format_duration(scale['interval'])}")
    if f.get("client_limiter"):
        parts.append(f"client_limiter {f['client_limiter']['kind']}")
    return ", ".join(parts)


def _line(text: str, markup: bool = False) -> None:
    console.print(text, highlight=False, markup=markup, soft_wrap=True)


def _table() -> Table:
    """One row a preset: name, library, the release read, hold or requeue, the formula."""
    listing = Table(title="Library presets", title_justify="left", header_style="bold",
                    box=box.SIMPLE_HEAD, caption_justify="left", expand=True,
                    caption="release read = the package version or commit each preset was "
                            "read at; --explain adds the source lines")
    listing.add_column("preset", no_wrap=True, style="bold")
    for heading, ratio in (("library", 3), ("release read", 2), ("on failure", 2),
                           ("sleep before retry k (k = 1 is the first)", 4)):
        listing.add_column(heading, ratio=ratio, overflow="fold")  # never "…"
    for p in table.PRESETS.values():
        listing.add_row(*(Text(cell) for cell in (p.name, p.library, p.release, _mode(p),
                                                  p.formula)))
    return listing


def _explain(preset: table.Preset) -> None:
    """What ``--explain`` adds for *preset*: its limits, the fields it sets, its sources."""
    _line(f"[bold]{preset.name}[/]", markup=True)
    _line(f"  limits: {preset.limits}")
    _line(f"  sets: {_defaults(preset)}")
    for source in preset.sources:
        _line(f"  read from: {source}")


@app.command("presets")
def list_presets(
    name: Annotated[str | None, typer.Argument(
        metavar="NAME", autocompletion=complete.presets,
        help="Show the scenario fields one preset sets.", show_default=False)] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Under the table, each preset's limits, the fields it sets and "
                          "the source lines it was read from.")] = False,
) -> None:
    """List the library presets: library, release read, hold or requeue, and formula
    (--explain: limits, fields and sources)."""
    if name is not None:
        try:
            preset = table.get(name)
        except ValueError as exc:
            raise UsageError(f"herdsim presets {name}: {exc}") from None
        console.print(f"[bold]{preset.name}[/]: {preset.library}", highlight=False)
        console.print(f"release read: {preset.release}", highlight=False, markup=False)
        console.print(f"sleep before retry k (k = 1 is the first): {preset.formula}",
                      highlight=False, markup=False, soft_wrap=True)
        console.print(f"limits: {preset.limits}", highlight=False, markup=False,
                      soft_wrap=True)
        if preset.differs:
            console.print(f"note: {preset.differs}", highlight=False, markup=False,
                          soft_wrap=True)
        console.print("read from: " + "; ".join(preset.sources), highlight=False,
                      markup=False, soft_wrap=True)
        console.print("sets (fields the scenario gives explicitly win):", highlight=False)
        console.print(yaml.safe_dump(preset.fields, sort_keys=False), highlight=False, markup=False,
                      soft_wrap=True)
        return
    console.print(_table())
    if explain:
        for preset in table.PRESETS.values():
            _explain(preset)
    console.print("Use one: retry.preset: NAME in a scenario (its own fields win), "
                  "--set retry.preset=NAME, compare --presets a,b, sweep --presets a,b. "
                  "herdsim presets NAME shows one whole"
                  + ("" if explain else ", --explain each one's limits, fields and sources")
                  + "; docs/policies.md has the table with what each library does that "
                  "herdsim does not model.", highlight=False)

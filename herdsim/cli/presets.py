"""``herdsim presets``: the retry policies of the libraries people run, and where each
was read."""

from __future__ import annotations

from typing import Annotated

import typer
import yaml

from herdsim.cli.app import app, console
from herdsim.config.durations import format_duration
from herdsim.errors import UsageError
from herdsim.policies import presets as table


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
    return ", ".join(parts)


def _line(text: str, markup: bool = False) -> None:
    console.print(text, highlight=False, markup=markup, soft_wrap=True)


@app.command("presets")
def list_presets(
    name: Annotated[str | None, typer.Argument(
        help="Show the scenario fields one preset sets.", show_default=False)] = None,
) -> None:
    """List the library presets: formula, defaults, hold or requeue, and the release and
    source read."""
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
    for preset in table.PRESETS.values():
        _line(f"[bold]{preset.name}[/]  {preset.library}; {_mode(preset)}", markup=True)
        _line(f"  release read: {preset.release}")
        _line(f"  sleep before retry k (k = 1 is the first): {preset.formula}")
        _line(f"  limits: {preset.limits}")
        _line(f"  sets: {_defaults(preset)}")
        for source in preset.sources:
            _line(f"  read from: {source}")
    console.print("Use one: retry.preset: NAME in a scenario (its own fields win), "
                  "--set retry.preset=NAME, compare --presets a,b, sweep --presets a,b. "
                  "herdsim presets NAME shows the fields it sets; docs/policies.md has "
                  "the table with what each library does that herdsim does not model.")

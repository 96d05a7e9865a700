"""Scenario files: YAML (or a dict) in, overrides applied, a validated
:class:`~herdsim.config.scenario.Scenario` out, or one :class:`ScenarioError` naming the
file, the field and the problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from herdsim.config import arguments, files
from herdsim.config import trace as traces
from herdsim.config.messages import problems
from herdsim.config.overrides import apply_overrides, fill_preset, value_text
from herdsim.config.plain import plain
from herdsim.config.reading import parse_yaml, read_text
from herdsim.config.scenario import Scenario
from herdsim.errors import ScenarioError, UsageError
from herdsim.policies.durations import format_duration


def validate(data: Any, source: str | None = None, trust_code: bool = True,
             sealed: bool = False) -> Scenario:
    """Validate plain data (as parsed from YAML) into a :class:`Scenario`.

    ``trust_code=False`` keeps a ``retry.strategy: module:Class`` as a name without
    importing it (for readers of someone else's files). ``sealed``: *data* is what
    herdsim wrote of a run (a run folder's scenario), perhaps an older herdsim that wrote
    every kind's fields: a field its kind does not read is dropped, not refused.
    """
    if not isinstance(data, dict):
        raise ScenarioError([("", "a scenario must be a mapping of sections")], source)
    fill_preset(data, source)
    try:
        scenario = Scenario.model_validate(data, context={"trust_code": trust_code,
                                                          "sealed": sealed})
    except ValidationError as exc:
        raise ScenarioError(problems(exc), source) from None
    trace = scenario.workload.trace
    if trace is not None and (trust_code or trace.sha256 is None):
        try:
            read_trace(scenario, Path(source).parent if source else Path())
        except ScenarioError as exc:
            raise ScenarioError(exc.problems, source) from None
    return scenario


def read_trace(scenario: Scenario, base: Path) -> None:
    """Resolve the trace's path (relative to *base*, the scenario's folder), read it once
    (streamed) and record its absolute path and SHA-256; a recorded SHA-256 must match.
    (Readers of a run folder, ``trust_code=False``, take a recorded trace's values unread:
    the folder stays readable when the trace has moved.)"""
    trace = scenario.workload.trace
    if trace is None:
        return
    path = Path(trace.file).expanduser()
    path = (path if path.is_absolute() else base / path).resolve()
    found = traces.scan(path, trace.format, trace.time_scale, trace.start, scenario.duration)
    if trace.sha256 is not None and trace.sha256 != found.sha256:
        raise ScenarioError([("workload.trace.sha256",
                              f"{path} has changed since it was recorded (SHA-256 "
                              f"{found.sha256[:12]}…, recorded {trace.sha256[:12]}…): this run "
                              "cannot be reproduced from it")])
    if found.within == 0:
        raise ScenarioError([("workload.trace.file",
                              f"{path}: no arrival falls within the run "
                              f"({format_duration(scenario.duration)})")])
    trace.file = str(path)
    trace.sha256 = found.sha256
    mean = found.within / scenario.duration
    if scenario.workload.rate is None:
        scenario.workload.rate = mean
    elif scenario.workload.rate != mean:  # a dump holds the mean it was given
        raise ScenarioError([("workload.rate",
                              f"{scenario.workload.rate:g} jobs/s beside a trace, whose mean "
                              f"over the run sets the rate ({mean:g}): remove rate")])


def load_scenario(
    source: str | Path | dict, overrides: dict[str, Any] | None = None,
    trust_code: bool = True, sealed: bool = False,
) -> Scenario:
    """Load a scenario from a YAML file (or a dict), apply overrides, and validate it.

    A ``retry.strategy`` that is not herdsim's own (``module:Class``, or an installed
    entry point's name) is code: it is resolved only with ``trust_code`` (the default);
    readers of output directories pass ``trust_code=False`` and ``sealed`` (see
    :func:`validate`).
    Raises :class:`ScenarioError` naming the file, the field and the problem.
    """
    label = None
    overrides = arguments.mapping("overrides", overrides)
    if not isinstance(source, (str, Path, dict)):
        raise UsageError(f"load_scenario({type(source).__name__}): expected a YAML file's "
                         "path, a bundled scenario's file, or a dict")
    if isinstance(source, dict):
        data = plain(source)
    else:
        path = Path(source)
        label = str(path)
        try:
            data = parse_yaml(read_text(path))
        except FileNotFoundError:
            raise ScenarioError([("", "no such file")], label) from None
        except IsADirectoryError:
            raise ScenarioError([("", "a directory, not a scenario file")], label) from None
        except files.NotRegularFile as exc:
            raise ScenarioError([("", f"{exc.strerror}; not a scenario file")],
                                label) from None
        except OSError as exc:
            raise ScenarioError([("", f"cannot read: {exc.strerror}")], label) from None
        except ValueError as exc:
            raise ScenarioError([("", str(exc))], label) from None
        except ScenarioError as exc:
            raise ScenarioError(exc.problems, label) from None
        if data is None:
            raise ScenarioError([("", "the file is empty")], label)
    if not isinstance(data, dict):
        raise ScenarioError([("", "a scenario must be a mapping of sections")], label)
    try:
        apply_overrides(data, overrides)
    except ScenarioError as exc:
        exc.source = label
        raise ScenarioError(exc.problems, label) from None
    return validate(data, label, trust_code, sealed).overridden(
        {path: raw if isinstance(raw, str) else value_text(raw)
         for path, raw in (overrides or {}).items()})

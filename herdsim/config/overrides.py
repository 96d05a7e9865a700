"""Changing a scenario's data before validation: a preset's fields filled in, ``--set``
paths applied (checked against the schema), and a setting written as a file has it."""

from __future__ import annotations

from typing import Any

from herdsim.config import graph
from herdsim.config.messages import suggest
from herdsim.config.plain import plain
from herdsim.config.reading import parse_yaml
from herdsim.config.scenario import Scenario
from herdsim.config.schema import section_type
from herdsim.errors import ScenarioError
from herdsim.policies import presets


def fill_preset(data: dict, source: str | None = None) -> None:
    """Fill the fields ``retry.preset`` sets and *data* leaves out (see
    :mod:`herdsim.policies.presets`), and those of each edge's preset (see
    :func:`herdsim.config.graph.fill_presets`)."""
    graph.fill_presets(data)
    retry = data.get("retry")
    name = retry.get("preset") if isinstance(retry, dict) else None
    if name is None:
        return
    try:
        preset = presets.get(name)
    except ValueError as exc:
        raise ScenarioError([("retry.preset", str(exc))], source) from None
    for path, value in preset.fields.items():
        *parents, leaf = path.split(".")
        node = data
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if leaf not in node and not (path == "retry.params" and node.get("strategy")
                                     not in (None, preset.fields["retry.strategy"])):
            node[leaf] = value.copy() if isinstance(value, dict) else value  # (the
            # params are its strategy's: not another's the user chose)


def _strip_preset_fields(data: dict, names: list[Any]) -> None:
    """Remove the fields the presets *names* control, so a new preset fills them."""
    for name in names:
        if name not in presets.PRESETS:
            continue
        for path in presets.get(name).fields:
            *parents, leaf = path.split(".")
            node = data
            for part in parents:
                node = node.get(part) if isinstance(node, dict) else None  # type: ignore[assignment]
            if isinstance(node, dict):
                node.pop(leaf, None)


def apply_overrides(data: dict, overrides: dict[str, Any] | None) -> dict:
    """Set dotted paths (``retry.strategy``, ``downstream.outages.0.duration``) in *data*.

    Values given as strings are parsed as YAML scalars (``null``, ``3``, ``true``, ``2s``).
    A path that names no field of the scenario raises :class:`ScenarioError`.
    ``retry.preset`` goes first and replaces the fields the old and the new preset
    control; the other overrides then win over the preset.
    """
    overrides = dict(overrides or {})

    def parsed(path: str, raw: Any) -> Any:
        try:
            return parse_yaml(raw) if isinstance(raw, str) else plain(raw)
        except ValueError as exc:
            raise ScenarioError([(path, f"--set value {raw!r} is not YAML: {exc}")]) from None
        except ScenarioError as exc:  # a value no field means, named at its path
            raise ScenarioError([(".".join(filter(None, (path, where))), problem)
                                 for where, problem in exc.problems]) from None

    if "retry.preset" in overrides:
        value = parsed("retry.preset", overrides.pop("retry.preset"))
        retry = data.get("retry") if isinstance(data.get("retry"), dict) else {}
        _strip_preset_fields(data, [retry.get("preset"), value])  # type: ignore[union-attr]  # a dict
        _set_path(data, "retry.preset", value)
    for path, raw in overrides.items():
        value = parsed(path, raw)
        if isinstance(value, str) and value == "":
            value = raw
        if path == "retry.strategy" and "retry.params" not in overrides:
            _drop_preset_params(data, value)
        _set_path(data, path, value)
    return data


def _drop_preset_params(data: dict, strategy: Any) -> None:
    """A strategy set over a preset's (``--set retry.strategy=...``, a compare arm) does
    without the preset's params: they are its strategy's (grpc-retry's ``jitter``), and
    another strategy refused them though the user never wrote them."""
    retry = data.get("retry")
    name = retry.get("preset") if isinstance(retry, dict) else None
    if name not in presets.PRESETS:
        return
    fields = presets.get(name).fields
    if "retry.params" in fields and strategy != fields["retry.strategy"] and \
            retry.get("params", fields["retry.params"]) == fields["retry.params"]:  # type: ignore[union-attr]
        retry["params"] = {}  # type: ignore[index]


_FREE_FORM = object()  # marks a dict field (e.g. retry.params) whose keys are the user's


class _Map:
    """Marks a map of sections (``services``): the next part is a key, then *section*."""

    def __init__(self, section: Any):
        self.section = section


def _set_path(data: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    if not all(parts):
        raise ScenarioError([(path, "not a field path (expected a.b.c)")])
    model: Any = Scenario
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError([(path, f"no list item {part!r} (the list has {len(node)})")])
            key: Any = int(part)
        elif model is _FREE_FORM:
            key = part
        elif isinstance(model, _Map):  # a map of sections (services): the key is a name
            key, model = part, model.section
        else:
            if model is None or part not in model.model_fields:
                where = ".".join(parts[:depth]) or "the scenario"
                hint = suggest(".".join(parts[: depth + 1])) if model is not None else ""
                raise ScenarioError([(path, f"{where} has no field {part!r}{hint}")])
            key = part
            annotation = model.model_fields[part].annotation
            model = section_type(annotation) or (
                _FREE_FORM if getattr(annotation, "__origin__", None) is dict else None)
            if getattr(annotation, "__origin__", None) is dict and model is not _FREE_FORM:
                model = _Map(model)
        if last:
            node[key] = value
            return
        child = node[key] if isinstance(node, list) else node.get(key)
        if child is None and parts[depth + 1].isdigit():
            raise ScenarioError([(path, f"no list item {parts[depth + 1]} (the list is empty)")])
        if child is None:
            child = node[key] = {}
        node = child


def value_text(value: Any) -> str:
    """A setting as a scenario file writes it (``None`` -> ``null``, ``True`` -> ``true``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)

"""The scenarios shipped inside the package: found by name, listed, copied out."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

SCHEMA = "scenario.schema.json"  # the scenarios' JSON Schema, beside them (herdsim schema)


def directory() -> Path:
    """The folder holding the bundled ``*.yaml`` files (inside the installed package)."""
    return Path(str(resources.files("herdsim") / "scenarios"))


def names() -> list[str]:
    """Every bundled scenario's name (its file name without ``.yaml``), sorted."""
    return sorted(path.stem for path in directory().glob("*.yaml"))


def path(name: str) -> Path | None:
    """The bundled file called *name* (``outage`` or ``outage.yaml``), or None."""
    stem = name[:-5] if name.endswith(".yaml") else name
    if "/" in stem or "\\" in stem or stem not in names():
        return None
    return directory() / f"{stem}.yaml"


def describe(name: str) -> str:
    """The first sentence of a bundled scenario's description."""
    text = (directory() / f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    description = " ".join(str(data.get("description", "")).split())
    first, dot, _ = description.partition(". ")
    return first + dot.strip()


def resolve(scenario: str | Path) -> Path:
    """*scenario* as given when that file exists, else the bundled scenario of that name
    (a folder of the same name, e.g. an output directory, does not hide it)."""
    given = Path(scenario)
    if given.is_file():
        return given
    bundled = path(str(scenario))
    return bundled if bundled is not None else given

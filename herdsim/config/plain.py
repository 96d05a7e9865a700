"""The one normalisation of a scenario's data, however it was given.

A scenario's data comes parsed from YAML, built in Python (numpy scalars, tuples), or as
an override's value; each becomes plain data here: mappings, lists, text, booleans, whole
and real numbers, null. A numpy scalar is its Python value, a numpy array or a tuple a
list. Anything else, and a whole number longer than :data:`MAX_DIGITS` digits (YAML's
reader marks one as :class:`TooLong` rather than converting it), is a
:class:`~herdsim.errors.ScenarioError` naming its field. The walk uses no recursion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herdsim.errors import ScenarioError

MAX_DIGITS = 100  # a whole number no scenario field can mean beyond (a seed: 2**128 is 39)
_LIMIT = 10 ** MAX_DIGITS
PLAIN = (str, bool, int, float, type(None))


@dataclass(frozen=True)
class TooLong:
    """A whole number in YAML too long to convert: its digits and its line (1-based)."""

    digits: int
    line: int


def _scalar(value: Any, path: str) -> Any:
    """*value* as plain data, or a problem naming *path*; containers pass unchanged."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _LIMIT:
        value = TooLong(MAX_DIGITS + 1, 0)
    if isinstance(value, TooLong):
        line = f" (line {value.line})" if value.line else ""
        raise ScenarioError([(path, f"a whole number of more than {MAX_DIGITS} digits"
                                    f"{line}; no field means one")])
    if isinstance(value, (*PLAIN, Mapping, list, tuple)):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return _scalar(value.tolist(), path)  # a numpy scalar or array
    raise ScenarioError([(path, f"a value of type {type(value).__name__}, not a scenario "
                                "value (text, a number, true or false, null, a list or a "
                                "mapping)")])


def plain(value: Any, where: str = "") -> Any:
    """A copy of *value* as plain data (see the module); *where* is its field's path."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, str]] = [(value, holder, 0, where)]
    while stack:
        item, parent, key, path = stack.pop()
        item = _scalar(item, path)
        node: Any
        if isinstance(item, Mapping):
            node = {}
            for name, child in item.items():
                name = _scalar(name, path)
                if not isinstance(name, PLAIN):
                    raise ScenarioError([(path, f"a key must be plain text, got {name!r}")])
                node[name] = None  # keeps the order as written
                stack.append((child, node, name, f"{path}.{name}" if path else str(name)))
        elif isinstance(item, (list, tuple)):
            node = [None] * len(item)
            stack.extend((child, node, i, f"{path}.{i}" if path else str(i))
                         for i, child in enumerate(item))
        else:
            node = item
        parent[key] = node
    return holder[0]

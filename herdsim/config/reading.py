"""A scenario file's text read safely: UTF-8 only, duplicate keys refused, YAML 1.2
integers, and a bound on the values an alias can expand to."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from herdsim.config import files
from herdsim.config.plain import MAX_DIGITS, TooLong, plain
from herdsim.errors import ScenarioError

MAX_NODES = 100_000  # YAML nodes of one scenario, aliases expanded (a "billion laughs" guard)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping, and reading whole
    numbers as YAML 1.2 does (``017`` is seventeen, not YAML 1.1's octal fifteen)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:  # an int or a TooLong
        text = str(self.construct_scalar(node)).replace("_", "")
        digits = text.lstrip("+-")
        if len(digits) > MAX_DIGITS:  # named with its field by :func:`plain`
            return TooLong(len(digits), node.start_mark.line + 1)
        if len(digits) > 1 and digits.startswith("0") and digits.isdigit():
            return int(text, 10)
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, f"a mapping key must be a plain value, got {key!r}",
                    key_node.start_mark) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark)
        return super().construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_implicit_resolver(  # 08 and 09: YAML 1.1 makes them text
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?0[0-9_]+$"), list("-+0"))


def _count_nodes(data: Any, budget: int = MAX_NODES) -> None:
    """Refuse documents whose values (aliases expanded) exceed *budget* nodes."""
    stack, count = [data], 0
    while stack:
        item = stack.pop()
        count += 1
        if count > budget:
            raise ScenarioError([("", f"more than {budget:,} values (aliases expanded); "
                                      "not a scenario")])
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_yaml(text: str) -> Any:
    """Parse YAML *text* (duplicate keys refused) into plain data (:func:`plain`); raise
    ``ValueError`` with a one-line reason naming the line and column, or
    :class:`ScenarioError` naming a field whose value no scenario can mean."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"YAML syntax error at {where}{problem}") from None
    except RecursionError:
        raise ValueError("YAML nested too deeply") from None
    _count_nodes(data)
    return plain(data)


def read_text(path: Path) -> str:
    """The UTF-8 text of a scenario file; a clear ``ValueError`` for binary files, UTF-16
    and other encodings."""
    raw = files.read_bytes(path, files.SCENARIO_LIMIT)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError("the file is UTF-16; save it as UTF-8")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                         f"{exc.start}); save it as UTF-8") from None
    if "\x00" in text:
        raise ValueError("a binary file (it holds NUL bytes), not a YAML scenario")
    return text

"""Checks of the Python API's arguments, so a wrong one is a :class:`UsageError` naming
the argument, as the CLI's options are, rather than a raw ``AttributeError`` or
``TypeError`` deep inside. A numpy scalar counts as its Python value."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from herdsim.errors import UsageError

MAX_REPLICATIONS = 10_000  # runs of one arm or cell: enough for any confidence interval
MAX_GRID_VALUES = 1_000  # values of one sweep axis
MAX_SWEEP_RUNS = 100_000  # cells x strategies of one sweep, each built before it runs
MAX_ARMS = 10_000  # arms of one comparison, each built before it runs


def names(argument: str, value: Any, choices: Sequence[str] | None = None,
          empty_ok: bool = False) -> list[str] | None:
    """A list of names: None stays None, ``"a,b"`` is split as the CLI splits it, a list
    must hold text; an empty list (unless *empty_ok*), a name twice or one not in *choices*
    is refused."""
    if value is None:
        return None
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",") if item.strip()]
    elif isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        raise UsageError(f"{argument}={_show(value)}: expected a list of names")
    if (not items and not empty_ok) or not all(items):
        raise UsageError(f"{argument}={_show(value)}: expected at least one name "
                         "(None for the default)")
    if len(set(items)) < len(items):
        raise UsageError(f"{argument}={_show(value)}: a name is listed twice")
    wrong = [item for item in items if choices is not None and item not in choices]
    if wrong:
        raise UsageError(f"{argument}={_show(value)}: {wrong[0]!r} is not one of "
                         f"{', '.join(choices or ())}")
    return items


def whole(argument: str, value: Any, minimum: int = 1, optional: bool = False,
          maximum: int | None = None) -> int | None:
    """A whole number >= *minimum* and <= *maximum* (None allowed when *optional*)."""
    if value is None and optional:
        return None
    try:
        number = None if isinstance(value, bool) else operator.index(value)  # numpy too
    except TypeError:
        number = None
    if number is None or number < minimum:
        raise UsageError(f"{argument}={_show(value)}: expected a whole number >= {minimum}")
    if maximum is not None and number > maximum:
        raise UsageError(f"{argument}={_show(value)}: at most {maximum:,}")
    return number


def flag(argument: str, value: Any) -> bool:
    """True or False (a numpy bool too)."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    if not isinstance(value, bool):
        raise UsageError(f"{argument}={_show(value)}: expected True or False")
    return value


def text(argument: str, value: Any, optional: bool = False) -> str | None:
    """Non-empty text (None allowed when *optional*)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{argument}={_show(value)}: expected text")
    return value


def texts(argument: str, value: Any) -> list[str]:
    """A list of texts, each kept whole (a grid's ``"path=v1,v2"``); one text is a list of
    one."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{argument}={_show(value)}: expected a list of texts such as "
                         "['workload.rate=50,100']")
    return list(value)


def mapping(argument: str, value: Any) -> dict[str, Any]:
    """A mapping with text keys (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"{argument}={_show(value)}: expected a dict such as "
                         "{'retry.strategy': 'full_jitter'}")
    return dict(value)


def path(argument: str, value: Any) -> Path:
    """A file-system path given as text or a Path."""
    if not isinstance(value, (str, Path)) or not str(value):
        raise UsageError(f"{argument}={_show(value)}: expected a path (text or Path)")
    return Path(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"

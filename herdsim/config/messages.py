"""Pydantic's validation errors rewritten as herdsim's one-line problems:
(field path, message), with a suggestion for a misspelt field."""

from __future__ import annotations

import difflib

from pydantic import (
    ValidationError,
)

from herdsim.config.scenario import Scenario
from herdsim.config.schema import model_at
from herdsim.policies.family import TAG_MARK
from herdsim.policies.fields import FieldError


def problems(exc: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"] if TAG_MARK not in str(part)]  # no choices
        field = ".".join(loc)
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, FieldError):  # its field is relative to the section raising it
            field = ".".join([*loc, cause.field])
            message = str(cause)
        else:
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown field" + suggest(field)
            elif err["type"] == "missing":
                message = "required field is missing"
            elif "input" in err and not isinstance(err["input"], (dict, list)) \
                    and f"got {err['input']!r}" not in message:
                shown = repr(err["input"])
                message += f" (got {shown if len(shown) <= 80 else shown[:79] + '…'})"
        problems.append((field, message))
    return problems


def suggest(field: str) -> str:
    parts = field.split(".")
    model = model_at(Scenario, ".".join(parts[:-1]))
    if model is None:
        return ""
    close = difflib.get_close_matches(parts[-1], list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""

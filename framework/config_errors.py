"""A config that does not validate, explained: each problem with its field, where its value
came from (the file, or the ``SPLITSTATE_*`` variable that set it) and a fix that exists.

Values reach the config from the file and from environment variables (which win); a
problem is blamed on a variable when one of the field's own variable or an enclosing one
(``SPLITSTATE_BATCH__MAX_RECORDS``, ``SPLITSTATE_BATCH``, ``SPLITSTATE_INPUTS`` for anything
in ``inputs``) is set. A field inside a list entry (``inputs[0].topic``) has no variable of its
own: the fix names the entry in the file. A field that does not exist is matched against the
fields that do at that place.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from framework.config_checks import ENV_PREFIX, nested_model
from framework.errors import SplitstateError

__all__ = ["ConfigError", "explain"]


class ConfigError(SplitstateError):
    """The app's configuration is invalid or contradicts what the app already recorded."""


_NESTED = "__"


def explain(
    error: ValidationError, model: type[BaseModel], path: Path | None, environ: Mapping[str, str]
) -> str:
    """The message for ``error``, raised validating ``model`` from the file ``path`` (or
    from code when ``None``) and the variables of ``environ``."""
    variables = {name.upper(): name for name in environ if name.upper().startswith(ENV_PREFIX)}
    lines = []
    blamed_file = False
    for problem in error.errors():
        loc = problem["loc"]
        field = ".".join(str(part) for part in loc) or "(top level)"
        message = problem["msg"].removeprefix("Value error, ")
        variable = _setting_variable(loc, variables)
        if variable is not None:
            fix = f"set by environment variable {variable}; fix: correct or unset it"
            if problem["type"] == "extra_forbidden":
                fix += _closest(model, loc, "; did you mean {}?")
        else:
            blamed_file = True
            fix = _fix(problem["type"], model, loc)
        lines.append(f"  - {field}: {message}" + (f" ({fix})" if fix else ""))
    source = f" in {path}" if path is not None and blamed_file else ""
    return "\n".join([f"invalid app config{source}:", *lines])


def _names(loc: tuple[int | str, ...]) -> list[str]:
    """The field names of ``loc`` up to its first list index (what a variable can name)."""
    names = []
    for part in loc:
        if not isinstance(part, str):
            break
        names.append(part)
    return names


def _variable(names: list[str]) -> str:
    return ENV_PREFIX + _NESTED.join(name.upper() for name in names)


def _setting_variable(loc: tuple[int | str, ...], variables: Mapping[str, str]) -> str | None:
    """The set variable that gave the value at ``loc`` (the field's, or an enclosing one)."""
    names = _names(loc)
    for end in range(len(names), 0, -1):
        found = variables.get(_variable(names[:end]))
        if found is not None:
            return found
    return None


def _fix(kind: str, model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """How to mend a problem of the file (or of code) at ``loc``."""
    if kind == "missing":
        names = _names(loc)
        if len(names) < len(loc):  # inside a list entry: no variable names it
            entry = "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[:-1]
            ).lstrip(".")
            return f"fix: add it to {entry} in the config file"
        return f"fix: add it to the config file or set {_variable(names)}"
    if kind == "extra_forbidden":
        return "fix: " + _closest(
            model,
            loc,
            "did you mean {}? Else remove it",
            "remove it, or check its spelling against docs/reference/config.md",
        )
    return ""


def _closest(
    model: type[BaseModel], loc: tuple[int | str, ...], template: str, otherwise: str = ""
) -> str:
    """``template`` with the field nearest to ``loc``'s last name at its place, if any."""
    place = _model_at(model, loc[:-1])
    if place is None or not isinstance(loc[-1], str):
        return otherwise
    close = difflib.get_close_matches(loc[-1], list(place.model_fields), n=1, cutoff=0.6)
    return template.format(close[0]) if close else otherwise


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model whose fields sit at ``loc`` (list indexes step into the list's items)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        annotation = field.annotation
        if typing.get_origin(annotation) is list:
            annotation = typing.get_args(annotation)[0]
        current = nested_model(annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None

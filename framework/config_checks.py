"""Settings that would otherwise be ignored without a word: ``SPLITSTATE_*`` environment
variables that name no config field (``kafka.settings`` librdkafka refuses are checked by
``framework.kafka.settings_check``).

pydantic-settings reads only the variables that match a field and ignores the rest, so a typo
(``SPLITSTATE_PROCESSING_GUARANTE=exactly-once``) would leave the default in force. Here every
``SPLITSTATE_`` variable must name a field (nested with ``__``, any key below a mapping field
such as ``kafka.settings``) or be one the framework reads itself; the error names the closest
field.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = [
    "ENV_PREFIX",
    "FRAMEWORK_VARIABLES",
    "check_environment",
    "environment_parse_problems",
    "nested_model",
    "settings_error_problems",
]

ENV_PREFIX = "SPLITSTATE_"
#: variables the framework reads itself (not config fields)
FRAMEWORK_VARIABLES = frozenset(
    {
        "SPLITSTATE_CACHE_DIR",  # where resolved jars are cached (framework/jvm.py)
        "SPLITSTATE_DEBUG",  # the CLI prints tracebacks
        "SPLITSTATE_FAULT",  # crash tests kill a process at named points
        "SPLITSTATE_LOG_FORMAT",  # `splitstate run` logs text or json (framework/ops/logs.py)
        "SPLITSTATE_PROCESSOR_ID",  # which processor `splitstate run` runs (one per host)
        "SPLITSTATE_SEED",  # a randomized test's seed
    }
)
_NESTED = "__"


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or is optionally), else ``None``."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _is_mapping(annotation: Any) -> bool:
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return any(typing.get_origin(c) in (dict, Mapping) for c in candidates)


def _variables(model: type[BaseModel], prefix: str) -> Iterator[str]:
    """Every variable naming a field of ``model`` (nested models' fields too)."""
    for name, field in model.model_fields.items():
        variable = f"{prefix}{name.upper()}"
        yield variable
        nested = nested_model(field.annotation)
        if nested is not None:
            yield from _variables(nested, variable + _NESTED)


def _names_a_field(model: type[BaseModel], parts: list[str]) -> bool:
    field = model.model_fields.get(parts[0].lower())
    if field is None:
        return False
    if len(parts) == 1 or _is_mapping(field.annotation):
        return True  # a leaf, or a key below a mapping field
    nested = nested_model(field.annotation)
    return nested is not None and _names_a_field(nested, parts[1:])


def check_environment(model: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """One problem per ``SPLITSTATE_*`` variable of ``environ`` that names no field of
    ``model`` (and is none of ``FRAMEWORK_VARIABLES``), with the closest field's variable."""
    known = list(_variables(model, ENV_PREFIX))
    problems = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in FRAMEWORK_VARIABLES:
            continue
        parts = upper.removeprefix(ENV_PREFIX).split(_NESTED)
        if all(parts) and _names_a_field(model, parts):
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else "see docs/reference/config.md"
        problems.append(
            f"environment variable {variable} names no config field ({hint} Fix: rename or "
            "unset it; nested fields are joined with __, e.g. SPLITSTATE_BATCH__MAX_RECORDS)"
        )
    return problems


def environment_parse_problems(field: str, environ: Mapping[str, str]) -> list[str]:
    """Why pydantic-settings could not read the ``SPLITSTATE_*`` variables of config field
    ``field`` (a mapping, list or section: their values must be JSON): one problem per such
    variable whose value is no JSON, saying where it breaks but never the value (it may be a
    secret); the field's variables when none is found at fault."""
    prefix = f"{ENV_PREFIX}{field.upper()}"
    variables = sorted(v for v in environ if v.upper().startswith(prefix))
    problems = []
    for variable in variables:
        value = environ[variable].strip()
        if value[:1] not in ("{", "["):
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError as error:
            problems.append(
                f"environment variable {variable} is not valid JSON ({error.msg}: line "
                f"{error.lineno}, column {error.colno}). Fix: give valid JSON: an object "
                """for a mapping or a section (e.g. '{"linger.ms": 5}'), a list for a list"""
            )
    if problems:
        return problems
    named = ", ".join(variables) or f"{prefix}*"
    return [
        f"environment variables of config field {field!r} ({named}) cannot be read: a "
        "mapping, list or section set in one variable must be JSON (an object or a list). "
        "Fix: give JSON, or set the field in the config file"
    ]


_SETTINGS_FIELD = re.compile(r'field "([^"]+)"')


def settings_error_problems(error: Exception, environ: Mapping[str, str]) -> list[str]:
    """The problems of a ``pydantic_settings.SettingsError`` (a variable's value it could not
    parse), by the field it names (``environment_parse_problems``: never the value)."""
    found = _SETTINGS_FIELD.search(str(error))
    return environment_parse_problems(found.group(1) if found else "", environ)

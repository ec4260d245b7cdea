"""Reference pages generated from the code: the config's fields from the pydantic models, the
command line from its argparse parsers, the control log's record kinds from their schemas and
the handoff phases from their state machine (the docs site's hook, ``tools/docs_hooks.py``,
puts them into ``docs/reference``), so that none can drift from what the code accepts."""

from __future__ import annotations

import argparse
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from framework.config import AppConfig
from framework.ops.cli import build_parser
from rebalance.control_schema import SCHEMAS
from rebalance.states import HANDOFF_MACHINE, HandoffPhase

__all__ = [
    "ConfigField",
    "cli_markdown",
    "config_fields",
    "config_fields_markdown",
    "config_sections",
    "control_records_markdown",
    "handoff_phases_markdown",
]

#: a relative link's target in Markdown (not a web address nor an anchor on the same page)
_LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s]+)\)")

#: constraint names of ``annotated_types`` and how the table writes them
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "min length"}


@dataclass(frozen=True)
class ConfigField:
    """One settable field of the config, by its dotted path (``inputs[].topic`` for a list)."""

    path: str
    type: str
    default: str
    constraints: str
    description: str


def config_fields(model: type[BaseModel] = AppConfig, prefix: str = "") -> Iterator[ConfigField]:
    """Every field of ``model``, nested models' fields by their dotted path, in declared order."""
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested, is_list = _nested_model(info.annotation)
        if nested is None or is_list:  # a nested model is its fields; a list, itself first
            yield _config_field(path, info)
        if nested is not None:
            yield from config_fields(nested, f"{path}[]." if is_list else f"{path}.")


def config_sections() -> list[tuple[list[str], type[BaseModel]]]:
    """Each model the config is made of with the paths it sits at (``["inputs[]",
    "outputs[]"]`` for the topics), ``AppConfig`` (at ``""``) first, then in declared order."""
    found: dict[type[BaseModel], list[str]] = {}

    def walk(model: type[BaseModel], path: str) -> None:
        seen = model in found
        found.setdefault(model, []).append(path)
        if seen:
            return
        for name, info in model.model_fields.items():
            nested, is_list = _nested_model(info.annotation)
            if nested is not None:
                walk(nested, f"{path}.{name}".lstrip(".") + ("[]" if is_list else ""))

    walk(AppConfig, "")
    return [(paths, model) for model, paths in found.items()]


def config_fields_markdown(heading_level: int = 2, docs_root: str = "../") -> str:
    """The config's reference in Markdown: a table of the top-level fields, then a section per
    nested part (``kafka``, ``inputs[]``/``outputs[]``, ``batch``, ...) with a table of its
    fields, each row: field, type, default, limits, description.

    A link in a description is relative to docs/ (so it reads the same wherever the
    description is shown); ``docs_root`` is how the page holding the tables reaches docs/
    (the config reference is docs/reference/config.md)."""
    parts: list[str] = []
    for paths, model in config_sections():
        title = ", ".join(f"`{path}`" for path in paths) if paths != [""] else "Top level"
        parts.append(f"{'#' * heading_level} {title}")
        rows = [
            "| field | type | default | limits | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, info in model.model_fields.items():
            nested, is_list = _nested_model(info.annotation)
            if nested is not None and not is_list:  # its own section
                continue
            field = _config_field(name, info)
            cells = [
                f"`{field.path}`",
                f"`{field.type}`",
                f"`{field.default}`" if field.default != "required" else "required",
                field.constraints,
                _LINK.sub(lambda link: f"]({docs_root}{link[1]})", field.description),
            ]
            rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        parts.append("\n".join(rows))
    return "\n\n".join(parts)


def cli_markdown(heading_level: int = 2) -> str:
    """Each ``splitstate`` command's ``--help``, the top level first, as Markdown sections."""
    sections: list[str] = []
    for name, parser in _parsers(build_parser(), "splitstate"):
        sections.append(f"{'#' * heading_level} `{name}`\n\n```text\n{_help(parser)}\n```")
    return "\n\n".join(sections)


def control_records_markdown() -> str:
    """Each control-log record kind (its ``type``) with the fields its schema reads."""
    rows = ["| `type` | fields (optional ones with `?`) |", "| --- | --- |"]
    for kind, schema in sorted(SCHEMAS.items()):
        fields = [
            f"`{name}{'' if info.is_required() else '?'}`: `{_type_name(info.annotation)}`"
            for name, info in schema.model_fields.items()
        ]
        rows.append(f"| `{kind}` | {_cell(', '.join(fields))} |")
    return "\n".join(rows)


def handoff_phases_markdown() -> str:
    """The handoff state machine: a Mermaid diagram and its table (phase, event, next)."""
    order = list(HandoffPhase)
    table = sorted(HANDOFF_MACHINE.table.items(), key=lambda item: order.index(item[0][0]))
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f"    {state} --> {after}: {event}" for (state, event), after in table]
    lines += ["```", "", "| phase | event | next phase |", "| --- | --- | --- |"]
    lines += [f"| `{state}` | `{event}` | `{after}` |" for (state, event), after in table]
    return "\n".join(lines)


def _parsers(
    parser: argparse.ArgumentParser, name: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:  # argparse keeps its subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for command, child in action.choices.items():
                yield from _parsers(child, f"{name} {command}")


def _help(parser: argparse.ArgumentParser) -> str:
    """The parser's help at a fixed width, whatever the terminal that builds the docs."""
    formatter = parser.formatter_class
    parser.formatter_class = lambda prog: formatter(prog, width=100)  # type: ignore[call-arg]
    try:
        return parser.format_help().rstrip()
    finally:
        parser.formatter_class = formatter


def _config_field(path: str, info: FieldInfo) -> ConfigField:
    return ConfigField(
        path=path,
        type=_type_name(info.annotation),
        default=_default(info),
        constraints=", ".join(_constraints(info)),
        description=info.description or "",
    )


def _nested_model(annotation: object) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (itself, or as list items), and whether it is a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, True
    return None, False


def _type_name(annotation: object) -> str:
    """A type as written in code, without ``Annotated`` constraints or module prefixes."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(arg) for arg in args)}]"
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(arg) for arg in args)}]"
    if isinstance(annotation, type):  # a private schema's name as its class's, NoneType as None
        return "None" if annotation is type(None) else annotation.__name__.lstrip("_")
    return re.sub(r"\b(?:typing|pathlib|datetime)\.", "", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        return "{}" if value == {} else "[]" if value == [] else repr(value)
    if info.default is PydanticUndefined:
        return "required"
    if isinstance(info.default, timedelta):  # as a config file writes it: seconds
        return f"{info.default.total_seconds():g}"
    if isinstance(info.default, bool):
        return str(info.default).lower()
    return str(info.default) if info.default is not None else "null"


def _constraints(info: FieldInfo) -> Iterator[str]:
    for item in info.metadata:
        for attribute, sign in _BOUNDS.items():
            bound = getattr(item, attribute, None)
            if bound is not None:
                yield f"{sign} {bound:_}" if isinstance(bound, int) else f"{sign} {bound}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")

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
    "control_records_markdown",
    "handoff_phases_markdown",
]

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
            yield ConfigField(
                path=path,
                type=_type_name(info.annotation),
                default=_default(info),
                constraints=", ".join(_constraints(info)),
                description=info.description or "",
            )
        if nested is not None:
            yield from config_fields(nested, f"{path}[]." if is_list else f"{path}.")


def config_fields_markdown() -> str:
    """The config's fields as a Markdown table: field, type, default, limits, description."""
    rows = [
        "| field | type | default | limits | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for field in config_fields():
        cells = [
            f"`{field.path}`",
            f"`{field.type}`",
            f"`{field.default}`" if field.default != "required" else "required",
            field.constraints,
            field.description,
        ]
        rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(rows)


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
    return str(info.default) if info.default is not None else "none"


def _constraints(info: FieldInfo) -> Iterator[str]:
    for item in info.metadata:
        for attribute, sign in _BOUNDS.items():
            bound = getattr(item, attribute, None)
            if bound is not None:
                yield f"{sign} {bound:_}" if isinstance(bound, int) else f"{sign} {bound}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")

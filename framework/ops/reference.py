"""Reference pages generated from the code: the config's fields from the pydantic models, and
the command line from its argparse parsers (the docs site's hook, ``tools/docs_hooks.py``,
puts them into ``docs/reference``), so that neither can drift from what the code accepts."""

from __future__ import annotations

import argparse
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from framework.config import AppConfig
from framework.ops.cli import build_parser

__all__ = ["ConfigField", "cli_markdown", "config_fields", "config_fields_markdown"]

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
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        return annotation.__name__
    text = str(annotation)
    return re.sub(r"\b(?:typing|pathlib|datetime|framework\.[\w.]+)\.", "", text)


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

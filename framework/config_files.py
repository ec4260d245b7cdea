"""Reading an app's config file: YAML or TOML, by its suffix (a syntax error says the line
and column, never the line's text: it may hold a secret); the environment wins over it."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsError

from framework.config_checks import settings_error_problems
from framework.config_errors import ConfigError, explain

__all__ = ["FileUnderEnvironment", "problems_error", "read_config_file"]


def problems_error(problems: list[str], what: str = "app config") -> ConfigError:
    """One ``ConfigError`` listing ``problems`` of the ``what``."""
    return ConfigError(f"invalid {what}:\n" + "\n".join(f"  - {p}" for p in problems))


class FileUnderEnvironment(BaseSettings):
    """Settings read from a file's values (passed as init values), over which the
    environment variables win."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Environment variables win over the file's values (passed as init values)."""
        return env_settings, init_settings

    @classmethod
    def validated(cls, data: dict[str, Any], path: Path | None, what: str) -> Self:
        """The settings of the file's ``data`` (read from ``path``) under the environment;
        a ``ConfigError`` naming each problem (never a variable's value) otherwise."""
        try:
            return cls(**data)
        except ValidationError as error:
            raise ConfigError(explain(error, cls, path, os.environ)) from None
        except SettingsError as error:  # a variable's value pydantic-settings cannot parse
            raise problems_error(settings_error_problems(error, os.environ), what) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings ``path`` holds (YAML or TOML, said by its suffix), or a ``ConfigError``
    naming the file and what is wrong with it."""
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist. Fix: pass an existing file.")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in {".yaml", ".yml"}:
            data = yaml.safe_load(text) or {}
        else:
            raise ConfigError(
                f"config file {path} must end in .yaml, .yml or .toml to say its format"
            )
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid yaml: {_yaml_problem(error)}") from None
    except tomllib.TOMLDecodeError as error:  # says where, and no more of the text than a char
        raise ConfigError(f"config file {path} is not valid toml: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings at the top")
    return data


def _yaml_problem(error: yaml.YAMLError) -> str:
    """What PyYAML found wrong, and where, without its copy of the line (a secret's, maybe)."""
    if not isinstance(error, yaml.MarkedYAMLError):
        return type(error).__name__
    parts = []
    for what, mark in ((error.problem, error.problem_mark), (error.context, error.context_mark)):
        if what:
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            parts.append(f"{what}{where}")
    return "; ".join(parts) or type(error).__name__

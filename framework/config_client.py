"""How a command reaches Kafka without an app (``splitstate tail TOPIC``): the ``kafka``
section of a config file, if one is given, overridden by the ``SPLITSTATE_KAFKA__*``
environment variables as an app's config would be (so its security settings apply too)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from framework.config_checks import ENV_PREFIX
from framework.config_errors import ConfigError, explain
from framework.config_files import read_config_file
from framework.config_kafka import KafkaConfig
from framework.redaction import RedactedRepr

__all__ = ["KafkaClientConfig"]


class KafkaClientConfig(RedactedRepr, BaseSettings):
    """Only ``kafka`` of an app config (the rest of a file is not read)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore"
    )

    kafka: KafkaConfig = Field(default_factory=KafkaConfig)

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
    def load(cls, path: Path | None = None) -> KafkaConfig:
        """The ``kafka`` section of ``path`` (YAML or TOML) if given, with the environment
        applied; ``ConfigError`` names what does not validate."""
        data: dict[str, Any] = {}
        if path is not None:
            kafka = read_config_file(path).get("kafka")
            if kafka is not None:
                data["kafka"] = kafka
        try:
            return cls(**data).kafka
        except ValidationError as error:
            raise ConfigError(explain(error, cls, path, os.environ)) from None

"""How a command reaches Kafka without an app (``splitstate tail TOPIC``): the ``kafka``
section of a config file, if one is given, overridden by the ``SPLITSTATE_KAFKA__*``
environment variables as an app's config would be (so its security settings apply too)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from framework.config import AppConfig
from framework.config_checks import ENV_PREFIX, check_environment
from framework.config_files import FileUnderEnvironment, problems_error, read_config_file
from framework.config_kafka import KafkaConfig
from framework.redaction import RedactedRepr

__all__ = ["KafkaClientConfig"]

#: the variables that set ``kafka`` (and misspellings of them, refused with the closest)
_VARIABLES = f"{ENV_PREFIX}KAFKA"


class KafkaClientConfig(RedactedRepr, FileUnderEnvironment):
    """Only ``kafka`` of an app config (the rest of a file is not read)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore"
    )

    kafka: KafkaConfig = Field(default_factory=KafkaConfig)

    @classmethod
    def load(cls, path: Path | None = None) -> KafkaConfig:
        """The ``kafka`` section of ``path`` (YAML or TOML) if given, with the environment
        applied; ``ConfigError`` names what does not validate."""
        kafkas = {k: v for k, v in os.environ.items() if k.upper().startswith(_VARIABLES)}
        unknown = check_environment(AppConfig, kafkas)  # (a misspelt one is no silent default)
        if unknown:
            raise problems_error(unknown, "kafka config")
        data: dict[str, Any] = {}
        if path is not None:
            kafka = read_config_file(path).get("kafka")
            if kafka is not None:
                data["kafka"] = kafka
        return cls.validated(data, path, "kafka config").kafka

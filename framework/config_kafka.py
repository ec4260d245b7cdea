"""How an app reaches Kafka (``KafkaConfig``) and the topics it reads and writes
(``TopicConfig``): parts of ``framework.config.AppConfig``."""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from framework.redaction import RedactedRepr
from rebalance.record_checks import MAX_PARTITIONS

__all__ = ["KafkaConfig", "TopicConfig", "check_name"]

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def check_name(value: str, what: str) -> str:
    """``value``, a name (``what``: of what) made of letters, digits, '.', '_', '-'."""
    if not _NAME.match(value):
        raise ValueError(
            f"{what} {value!r} may only use letters, digits, '.', '_' and '-' (1-200 chars)"
        )
    return value


class KafkaConfig(RedactedRepr, BaseModel):
    """How to reach Kafka; ``settings`` pass through to librdkafka (e.g. security)."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092",
        description="host:port,... of the brokers ($KAFKA_BOOTSTRAP_SERVERS, when set, "
        "stands in for this default)",
    )
    settings: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _kafkas_usual_variable(cls, data: Any) -> Any:
        """Without ``bootstrap_servers`` (from the config or ``SPLITSTATE_KAFKA__...``),
        Kafka's usual ``KAFKA_BOOTSTRAP_SERVERS`` names the brokers."""
        usual = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if usual and isinstance(data, dict) and "bootstrap_servers" not in data:
            return {**data, "bootstrap_servers": usual}
        return data

    def client_settings(self) -> dict[str, Any]:
        """Settings for a confluent-kafka client: bootstrap servers plus the pass-through."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.settings}


class TopicConfig(BaseModel):
    """An input or output topic; ``partitions`` is used when splitstate creates it."""

    model_config = ConfigDict(extra="forbid")

    topic: str
    partitions: int = Field(
        default=1,
        ge=1,
        le=MAX_PARTITIONS,
        description="when splitstate creates the topic (an input's default: "
        "initial_processors, as an input needs initial_processors x 2^k)",
    )
    replication_factor: int = Field(default=1, ge=1)
    producer_lease_ms: int = Field(
        default=10_000,
        ge=100,
        description="how long producers may place keys with the count they last read",
    )
    producer_delivery_timeout_ms: int = Field(
        default=30_000, ge=1000, description="producers' delivery.timeout.ms (expand waits it)"
    )
    retention_ms: int | None = Field(
        default=None,
        ge=-1,
        description="retention.ms `topics create` sets (inputs: -1, keep all, unless given)",
    )

    @field_validator("topic")
    @classmethod
    def _valid_topic(cls, value: str) -> str:
        return check_name(value, "topic name")

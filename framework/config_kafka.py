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
        description="where Kafka is, `host:port,...` (when neither the config nor "
        "`SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS` sets it, Kafka's usual `KAFKA_BOOTSTRAP_SERVERS` "
        "does). Before its first request every command and processor checks that a broker "
        "answers there: after 10 s in which every server refused the connection or did not "
        "resolve (30 s when one accepted but did not answer) it stops, naming what each server "
        "said and the fix",
    )
    settings: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="any librdkafka settings (security, tuning), passed to every client; "
        "checked by librdkafka before the app's first client starts",
    )

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

    topic: str = Field(description="the topic's name")
    partitions: int = Field(
        default=1,
        ge=1,
        le=MAX_PARTITIONS,
        description="used by `topics create`, `expand` and a start that creates missing topics "
        "(an input's default: `initial_processors`, as an input needs `initial_processors` x "
        "2^k partitions; an output's: 1)",
    )
    replication_factor: int = Field(
        default=1, ge=1, description="when splitstate creates the topic"
    )
    producer_lease_ms: int = Field(
        default=10_000,
        ge=100,
        description="how long producers may place keys with the partition count they last "
        "read; recorded in the topic registry when the topic is first registered",
    )
    producer_delivery_timeout_ms: int = Field(
        default=30_000,
        ge=1000,
        description="producers' `delivery.timeout.ms` (`expand` waits it); recorded in the "
        "topic registry when the topic is first registered",
    )
    retention_ms: int | None = Field(
        default=None,
        ge=-1,
        description="the `retention.ms` that `topics create` gives a topic it creates (inputs: "
        "`-1`, keep every record, unless given; see "
        "[Input retention](concepts/catch-up.md#input-retention)); outputs get it only when "
        "given (else the broker's default)",
    )

    @field_validator("topic")
    @classmethod
    def _valid_topic(cls, value: str) -> str:
        return check_name(value, "topic name")

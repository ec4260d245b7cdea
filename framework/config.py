"""The one config object an app is built from: a YAML or TOML file, overridden by environment.

``AppConfig.load(path)`` reads the file and then applies ``SPLITSTATE_*`` environment variables
(nested fields with ``__``, e.g. ``SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS``), which win over the
file. Every problem becomes a ``ConfigError`` naming the field and the fix. Secrets (in
``kafka.settings``, ``spark.settings``, ``spark.kafka_options``, ``snapshots.url``) are masked
whenever the config is printed, and masked in any error or log line once it is validated
(``framework.redaction``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from framework.config_checks import ENV_PREFIX, check_environment, environment_parse_problems
from framework.config_errors import ConfigError, explain
from framework.config_files import read_config_file
from framework.config_kafka import KafkaConfig, TopicConfig, check_name
from framework.config_time import TimeConfig
from framework.redaction import RedactedRepr, mask_secrets, redacted_data, remember_secrets
from framework.redaction import secret_values as _secret_values

__all__ = [
    "DEFAULT_TOMBSTONES_CACHED",
    "AppConfig",
    "BatchConfig",
    "ConfigError",
    "KafkaConfig",
    "MetricsConfig",
    "ScalingConfig",
    "SnapshotConfig",
    "SparkConfig",
    "TimeConfig",
    "TopicConfig",
    "mask_secrets",
]

#: the field in pydantic-settings' "error parsing value for field "kafka" from source ..."
_SETTINGS_FIELD = re.compile(r'field "([^"]+)"')

#: how many ``(topic, key, step)`` a producer remembers writing compaction tombstones for
#: (``framework.growth.compaction_writes``), unless configured
DEFAULT_TOMBSTONES_CACHED = 100_000


class BatchConfig(BaseModel):
    """How many records one loop iteration takes, how long it waits for them, and how many
    processed batches may wait for Kafka while the next are processed (``in_flight``: under
    at-least-once each commits once its outputs are acknowledged; under exactly-once they
    share one transaction; 1: each batch waits before the next is polled)."""

    model_config = ConfigDict(extra="forbid")

    max_records: int = Field(default=2000, ge=1, le=1_000_000)
    max_wait_ms: int = Field(default=100, ge=1, le=60_000)
    in_flight: int = Field(default=4, ge=1, le=64)


class ScalingConfig(BaseModel):
    """How a joining processor catches up before it takes partitions over."""

    model_config = ConfigDict(extra="forbid")

    ready_lag: int = Field(default=1000, ge=0, description="T1 - T2 under which it is READY")
    catchup_batch: int = Field(
        default=20_000,
        ge=1,
        le=1_000_000,
        description="records a catch-up applies per loop iteration (and keeps read ahead)",
    )


class SparkConfig(RedactedRepr, BaseModel):
    """How Spark builds state in bulk (``bootstrap: spark`` and ``splitstate backfill``)."""

    model_config = ConfigDict(extra="forbid")

    master: str = Field(default="local[2]", description="spark.master, e.g. spark://host:7077")
    settings: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="any spark.* settings, passed through"
    )
    kafka_options: dict[str, str] = Field(
        default_factory=dict,
        description="options for Spark's Kafka source (kafka.*), on top of kafka.settings",
    )
    archive: Path | None = Field(
        default=None, description="Parquet archive of the input topics to bootstrap from"
    )
    shards: int = Field(default=32, ge=1, le=4096, description="fold groups per processor")
    work_dir: Path | None = Field(
        default=None, description="where SST files are staged (default <state_dir>/bootstrap)"
    )


class SnapshotConfig(RedactedRepr, BaseModel):
    """Durable snapshots of each processor's state: how joiners get state, and how a
    processor that lost its disk comes back, without the input's whole history."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    url: str | None = Field(
        default=None,
        description="a directory or pyarrow.fs URL (s3://, gs://, hdfs://, file://) all "
        "processors reach; default <state_dir>-snapshots next to the state directory",
    )
    interval_seconds: float = Field(default=300.0, gt=0, description="take one this often")
    interval_records: int | None = Field(
        default=1_000_000, ge=1, description="... or after this many records (None: by time only)"
    )
    keep: int = Field(default=3, ge=1, le=1000, description="snapshots kept per processor")
    slice_bytes: int = Field(
        default=8 << 20, ge=1024, description="bytes copied between two batches at most"
    )


class MetricsConfig(BaseModel):
    """Each processor's Prometheus metrics and health endpoint (off unless ``port`` is set)."""

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="HTTP port of /metrics, /healthz, /readyz (None: off; 0: any free port); "
        "under `run --all` processor j listens on port + j",
    )
    host: str = Field(default="127.0.0.1", min_length=1, description="address to listen on")
    stall_seconds: float = Field(
        default=120.0, gt=0, description="/healthz fails once the loop made no step this long"
    )


class AppConfig(RedactedRepr, BaseSettings):
    """Everything an app needs: identity, Kafka, topics, processors, state, batching, errors."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid"
    )

    app_id: str
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    inputs: list[TopicConfig] = Field(min_length=1)
    outputs: list[TopicConfig] = Field(default_factory=list)
    initial_processors: int = Field(
        default=1,
        ge=1,
        description="the processors of the app's first start (B): every input has B x 2^k "
        "partitions; it never changes (any processor count can run later)",
    )
    processors: int | None = Field(default=None, ge=1)
    state_dir: Path | None = None
    key_hash: Literal["murmur3"] = "murmur3"
    batch: BatchConfig = Field(default_factory=BatchConfig)
    scaling: ScalingConfig = Field(default_factory=ScalingConfig)
    dead_letter_topic: str | None = Field(
        default=None,
        description="where bad records go; unset: <app_id>-dead-letters, filled in when the "
        "config is validated, so a loaded config's dead_letter_topic is the topic in force",
    )
    on_error: Literal["dead-letter", "stop"] = "dead-letter"
    auto_create_topics: bool = Field(
        default=True,
        description="a processor's start creates the app's input and output topics that are "
        "missing, as `splitstate topics create` does (configured partitions; inputs keep "
        "every record unless retention_ms says otherwise)",
    )
    crash_limit: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="crashes of the processor by one record before it is dead-lettered and "
        "skipped, or by one timer or window result a tick fires before that item is dropped "
        "as failed (with on_error: stop, the processor stops instead)",
    )
    processing_guarantee: Literal["exactly-once", "at-least-once"] = "exactly-once"
    bootstrap: Literal["snapshot", "replay", "spark"] = "snapshot"
    spark: SparkConfig = Field(default_factory=SparkConfig)
    snapshots: SnapshotConfig = Field(default_factory=SnapshotConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    time: TimeConfig = Field(default_factory=TimeConfig)
    compaction_tombstones_cached: int = Field(
        default=DEFAULT_TOMBSTONES_CACHED,
        ge=0,
        le=100_000_000,
        description="keys per output producer whose compaction tombstones it remembers "
        "writing (compacted topics whose partition count changed; 0: a tombstone with every "
        "record of a key that moved)",
    )

    @field_validator("inputs", "outputs", mode="before")
    @classmethod
    def _topic_names(cls, value: Any) -> Any:
        """A topic may be given by its name alone (``inputs=["orders"]``)."""
        if isinstance(value, list):
            return [{"topic": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("app_id")
    @classmethod
    def _valid_app_id(cls, value: str) -> str:
        return check_name(value, "app_id")

    @field_validator("dead_letter_topic")
    @classmethod
    def _valid_dead_letter_topic(cls, value: str | None) -> str | None:
        return None if value is None else check_name(value, "dead_letter_topic")

    @model_validator(mode="after")
    def _consistent(self) -> AppConfig:
        if self.dead_letter_topic is None:
            self.dead_letter_topic = f"{self.app_id}-dead-letters"
        for topic in self.inputs:  # (an input needs initial_processors x 2^k partitions)
            if "partitions" not in topic.model_fields_set:
                topic.partitions = self.initial_processors
        names = [t.topic for t in self.inputs] + [t.topic for t in self.outputs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"topics listed twice in inputs/outputs: {duplicates}")
        # the control log, the progress reports, the topic registry
        reserved = {self.control_topic, self.progress_topic, "__splitstate_topics"}
        used = [*names, self.dead_letters]
        if clash := sorted(reserved & set(used)):
            raise ValueError(
                f"topics {clash} are splitstate's own (the app's control log, its progress "
                "reports or the topic registry) and cannot be an input, an output or the "
                "dead-letter topic. Fix: name another topic."
            )
        if self.bootstrap == "snapshot" and not self.snapshots.enabled:
            raise ValueError(
                "bootstrap: snapshot needs snapshots (snapshots.enabled is false). Fix: enable "
                "snapshots, or set bootstrap: replay (or spark)"
            )
        if self.processors is not None and self.processors < self.initial_processors:
            raise ValueError(
                f"processors ({self.processors}) cannot be below initial_processors "
                f"({self.initial_processors})"
            )
        remember_secrets(_secret_values(self))  # masked in every error and log line from now
        return self

    @property
    def processor_count(self) -> int:
        """The processors wanted now (``processors``, defaulting to ``initial_processors``)."""
        return self.processors or self.initial_processors

    @property
    def dead_letters(self) -> str:
        """The dead-letter topic in force (``dead_letter_topic``; ``<app_id>-dead-letters``
        when not set)."""
        return self.dead_letter_topic or f"{self.app_id}-dead-letters"

    @property
    def app_state_dir(self) -> Path:
        """Where this app's processors keep state (default ``.splitstate/state/<app_id>``)."""
        return self.state_dir or Path(".splitstate") / "state" / self.app_id

    @property
    def snapshot_url(self) -> str:
        """Where snapshots go (``snapshots.url``, default ``<state_dir>-snapshots``)."""
        if self.snapshots.url:
            return self.snapshots.url
        state = self.app_state_dir
        return str(state.with_name(f"{state.name}-snapshots"))

    @property
    def bootstrap_dir(self) -> Path:
        """Where Spark bootstraps stage their SST files (``spark.work_dir`` or in state)."""
        return self.spark.work_dir or self.app_state_dir / "bootstrap"

    def spark_kafka_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source: the Kafka settings as ``kafka.*``, overridable."""
        options = {
            "kafka.bootstrap.servers": self.kafka.bootstrap_servers,
            # an input may be another app's transactional output: never its aborted records
            "kafka.isolation.level": "read_committed",
        }
        for key, value in self.kafka.settings.items():
            options[f"kafka.{key}"] = str(value).lower() if isinstance(value, bool) else str(value)
        options.update(self.spark.kafka_options)
        return options

    @property
    def control_topic(self) -> str:
        """The app's control log topic."""
        return f"{self.app_id}-splitstate-control"

    @property
    def progress_topic(self) -> str:
        """The topic processors write their progress reports to (``status`` reads them)."""
        return f"{self.app_id}-splitstate-progress"

    def input_topic(self, name: str) -> TopicConfig:
        """The input topic called ``name``."""
        for topic in self.inputs:
            if topic.topic == name:
                return topic
        raise ConfigError(
            f"{name!r} is not an input topic of app {self.app_id!r}; inputs: "
            f"{[t.topic for t in self.inputs]}. Fix: add it under `inputs` in the config."
        )

    def redacted(self) -> dict[str, Any]:
        """The config as plain data with secrets masked (safe to print or log)."""
        return redacted_data(self)

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
    def load(cls, path: Path | None = None, **overrides: Any) -> AppConfig:
        """Read ``path`` (YAML or TOML) if given, apply the environment, and validate."""
        unknown = check_environment(cls, os.environ)
        if unknown:
            raise ConfigError("invalid app config:\n" + "\n".join(f"  - {p}" for p in unknown))
        data: dict[str, Any] = {}
        if path is not None:
            data = read_config_file(path)
        data.update(overrides)
        try:
            return cls(**data)
        except ValidationError as error:
            raise ConfigError(explain(error, cls, path, os.environ)) from None
        except SettingsError as error:  # a variable's value pydantic-settings cannot parse
            found = _SETTINGS_FIELD.search(str(error))
            problems = environment_parse_problems(found.group(1) if found else "", os.environ)
            raise ConfigError(
                "invalid app config:\n" + "\n".join(f"  - {p}" for p in problems)
            ) from None

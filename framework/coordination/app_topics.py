"""The topics an app reads and writes, as ``splitstate topics create`` makes them and as a
processor's first start does when they are missing (``auto_create_topics``).

Inputs keep their whole history unless told otherwise (a replay reads all of it; with snapshots
a finite ``retention_ms`` suffices, ``check_input_retention``); outputs keep the broker's
default. The dead letters, the control log, the progress reports and the topic registry are
made by every start (``framework.coordination.layout.prepare_app``) and ``topics create``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from framework.config import AppConfig, ConfigError, TopicConfig
from framework.kafka import TopicSpec

__all__ = [
    "INPUT_RETENTION_MS",
    "check_input_retention",
    "input_and_output_specs",
    "minimum_input_retention_ms",
]

log = logging.getLogger("splitstate")

#: ``retention.ms`` of input topics splitstate makes (``-1``: keep every record).
INPUT_RETENTION_MS = -1


def input_and_output_specs(
    config: AppConfig, tables: Mapping[str, Mapping[str, str]] | None = None
) -> list[TopicSpec]:
    """The app's input topics (``retention.ms`` -1 unless given; ``tables``: the configs
    of its tables' topics, ``framework.tables.topics.table_topic_configs``, with the
    ``retention.ms`` given) and output topics, with their configured partition counts."""
    inputs = [
        TopicSpec(
            t.topic,
            t.partitions,
            t.replication_factor,
            _retention(t, INPUT_RETENTION_MS)
            if tables is None or t.topic not in tables
            else {**tables[t.topic], **(_retention(t, None) or {})},
        )
        for t in config.inputs
    ]
    outputs = [
        TopicSpec(t.topic, t.partitions, t.replication_factor, _retention(t, None))
        for t in config.outputs
    ]
    return [*inputs, *outputs]


def minimum_input_retention_ms(config: AppConfig) -> int:
    """The least ``retention.ms`` an input needs with snapshots: a restore or a transfer
    reads from a snapshot at most ``snapshots.interval_seconds`` old (twice, for an upload
    that failed once), plus an hour to notice and act."""
    return int((2 * config.snapshots.interval_seconds + 3600) * 1000)


def check_input_retention(config: AppConfig) -> None:
    """Refuse an input ``retention_ms`` too short for the app to rebuild state; warn when
    it is finite with a bootstrap that needs the whole history."""
    for topic in config.inputs:
        retention = topic.retention_ms
        if retention is None or retention == -1:
            continue
        if config.bootstrap == "snapshot":
            least = minimum_input_retention_ms(config)
            every = config.snapshots.interval_seconds
            if retention < least:
                raise ConfigError(
                    f"input {topic.topic!r} has retention_ms {retention}, but a processor "
                    f"restoring from a snapshot (taken every {every:.0f}s) may need records "
                    f"up to {least} ms old. Fix: set retention_ms to at "
                    f"least {least} (2 x snapshots.interval_seconds + 1 hour), or -1."
                )
        elif not (config.bootstrap == "spark" and config.spark.archive is not None):
            log.warning(
                "input %r keeps records for %d ms only: with bootstrap: %s a scale replays the "
                "whole history, so scales are refused once retention deleted records. Use "
                "bootstrap: snapshot (the default), or spark with an archive.",
                topic.topic,
                retention,
                config.bootstrap,
            )


def _retention(topic: TopicConfig, default: int | None) -> dict[str, str] | None:
    """``retention.ms`` when given or defaulted."""
    retention = default if topic.retention_ms is None else topic.retention_ms
    return None if retention is None else {"retention.ms": str(retention)}

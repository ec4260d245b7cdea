"""What a table's topic must keep so that a rebuild from the log (a Spark build, a lost state
directory, a backfill, a catch-up by replay) reads the versions the live run read.

Kafka's log cleaner removes a record of a compacted topic once a later record of its key is
in the cleanable part of the log, whose records are all older than the topic's
``min.compaction.lag.ms`` (by their Kafka timestamps). A version removed so can only have
been read by stream records applied before its successor, so the rule is KIP-889's for
versioned stores' changelogs, with the streams' retention in place of its day of margin:

    ``min.compaction.lag.ms >= history + R``

where ``history`` is the table's (ms) and ``R`` the largest ``retention.ms`` of the app's
other inputs: a stream record a rebuild still replays is younger than ``R``, and it reads
versions back to ``history`` before the key's table time. When one of them keeps every record
(``retention.ms`` -1, splitstate's default for inputs) a rebuild replays its whole history,
and no version may ever be compacted away: the table topic is then made as other inputs are
(``cleanup.policy=delete``, ``retention.ms`` -1). The rule takes event times to follow the
Kafka timestamps; a table or a stream whose event times lag its Kafka timestamps by up to
*d* ms needs *d* more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from framework.config_errors import ConfigError
from framework.config_kafka import TopicConfig

if TYPE_CHECKING:
    from framework.app import App

__all__ = ["check_table_topics", "least_compaction_lag_ms", "table_topic_configs"]

#: ``retention.ms`` of a topic that keeps every record
_FOREVER = -1


def least_compaction_lag_ms(history: int, stream_retentions: list[int]) -> int | None:
    """The least ``min.compaction.lag.ms`` of a table's topic (see the module): ``history``
    plus the largest of the other inputs' ``stream_retentions`` (ms); ``None`` when one of
    them keeps every record (-1, or none given), so the topic may not be compacted at all."""
    if not stream_retentions or any(r < 0 for r in stream_retentions):
        return None
    return history + max(stream_retentions)


def table_topic_configs(app: App) -> dict[str, dict[str, str]]:
    """The configs ``splitstate topics create`` (and a start's ``auto_create_topics``)
    gives each table's topic: compacted with ``min.compaction.lag.ms`` at the least the
    module's rule allows, when every other input's configured ``retention_ms`` is finite;
    else kept whole as other inputs are (``retention.ms`` -1, not compacted)."""
    configs: dict[str, dict[str, str]] = {}
    for topic, spec in app.tables.items():
        retentions = [_configured(t.retention_ms) for t in _streams(app)]
        lag = least_compaction_lag_ms(spec.history, retentions)
        configs[topic] = (
            {"retention.ms": str(_FOREVER)}
            if lag is None
            else {"cleanup.policy": "compact", "min.compaction.lag.ms": str(lag)}
        )
    return configs


def check_table_topics(app: App, found: Mapping[str, Mapping[str, str | None]]) -> None:
    """Raise ``ConfigError`` when a table's topic, as Kafka describes it (``found``: topic
    configs by topic, ``Kafka.topic_configs``; a topic not described is not checked), is
    compacted with a ``min.compaction.lag.ms`` below the module's rule for the retention the
    other inputs have there: Kafka may then remove versions a rebuild still reads, and the
    rebuilt state would silently differ from the live one."""
    for topic, spec in app.tables.items():
        configs = found.get(topic)
        if configs is None or not _compacts(configs):
            continue
        retentions = [_described(found.get(t.topic)) for t in _streams(app)]
        least = least_compaction_lag_ms(spec.history, retentions)
        lag = _int(configs.get("min.compaction.lag.ms"), 0)
        if least is not None and lag >= least:
            continue
        need = (
            "a stream input keeps every record (retention.ms -1), so a rebuild replays "
            "all of it and no version may be compacted: set cleanup.policy=delete with "
            "retention.ms=-1 on it"
            if least is None
            else f"set min.compaction.lag.ms to at least {least} (history {spec.history} + "
            f"the largest stream retention.ms {least - spec.history})"
        )
        raise ConfigError(
            f"table topic {topic!r} is compacted with min.compaction.lag.ms {lag}: Kafka may "
            "remove versions that a rebuild from the log (Spark build, lost state, backfill, "
            "a scale's replay) still reads, so the rebuilt state would differ from the live "
            f"one. Fix: {need} (`kafka-configs --alter --entity-type topics --entity-name "
            f"{topic} --add-config ...`; docs/concepts/tables.md, 'The table's topic')"
        )


def _streams(app: App) -> list[TopicConfig]:
    """The app's inputs that are no tables."""
    return [t for t in app.config.inputs if t.topic not in app.tables]


def _configured(retention: int | None) -> int:
    return _FOREVER if retention is None else retention


def _described(configs: Mapping[str, str | None] | None) -> int:
    """A described topic's ``retention.ms`` (not described: kept whole, as made)."""
    if configs is None:
        return _FOREVER
    return _int(configs.get("retention.ms"), _FOREVER)


def _compacts(configs: Mapping[str, str | None]) -> bool:
    policies = (configs.get("cleanup.policy") or "").split(",")
    return "compact" in [part.strip() for part in policies]


def _int(raw: str | None, default: int) -> int:
    try:
        return default if raw is None else int(raw)
    except ValueError:
        return default

"""What splitstate requires of topics, checked through any ``Kafka`` port: coordination logs
that never delete records, and the offsets Kafka still holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from framework.kafka.errors import RetentionError
from framework.kafka.port import Kafka
from rebalance.positions import OffsetRange, Position

__all__ = ["COMPACTED", "check_retention", "compacts", "watermarks"]

#: Topic configs of a coordination log (control log, topic registry): compacted, and never
#: deleting a record for its age or the topic's size (said explicitly, not left to defaults).
COMPACTED = {
    "cleanup.policy": "compact",
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "min.insync.replicas": "1",
}


def compacts(configs: Mapping[str, str | None]) -> bool:
    """Whether a topic of these configs (``Kafka.topic_configs``) is compacted: its
    ``cleanup.policy`` includes ``compact`` (``compact`` or ``compact,delete``)."""
    return "compact" in _policies(configs)


def _policies(configs: Mapping[str, str | None]) -> list[str]:
    """The parts of a topic's ``cleanup.policy``."""
    return [part.strip() for part in (configs.get("cleanup.policy") or "").split(",")]


def check_retention(kafka: Kafka, topics: Sequence[str]) -> None:
    """Raise ``RetentionError`` when a topic's config would delete records.

    A topic deletes records when its ``cleanup.policy`` includes ``delete`` and its
    ``retention.ms`` or ``retention.bytes`` is finite. Topics that do not exist are skipped
    (they hold nothing to lose).
    """
    for topic, configs in kafka.topic_configs(topics).items():
        policy = configs.get("cleanup.policy") or ""
        if "delete" not in _policies(configs):
            continue
        finite = {
            setting: configs.get(setting)
            for setting in ("retention.ms", "retention.bytes")
            if int(configs.get(setting) or -1) >= 0
        }
        if finite:
            found = " and ".join(f"{setting}={value}" for setting, value in finite.items())
            fix = ",".join(f"{setting}=-1" for setting in finite)
            raise RetentionError(
                f"topic {topic!r} would delete records: cleanup.policy={policy} with {found}. "
                "It holds splitstate's coordination records, and a lost record changes what "
                "every processor computes. Fix: `kafka-configs.sh --bootstrap-server HOST:PORT "
                f"--alter --entity-type topics --entity-name {topic} --add-config {fix}` (or "
                "set cleanup.policy=compact)."
            )


def watermarks(
    kafka: Kafka, positions: Iterable[Position], group_id: str = "splitstate-history"
) -> dict[Position, OffsetRange]:
    """``[earliest retained, end)`` of each partition, as Kafka reports them now."""
    with kafka.consumer(group_id) as consumer:
        return consumer.watermarks(sorted(positions))

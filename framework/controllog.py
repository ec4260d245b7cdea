"""The app's control log on Kafka: a compacted single-partition topic of JSON records.

Records are applied in order to ``rebalance.ControlState`` (pure and deterministic), so every
reader agrees. Keys are unique per fact (``app``, ``generation/<g>``, ``metadata_hash``), so
compaction never drops a generation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from framework.kafka_io import COMPACTED, TopicSpec, append, ensure_topics, read_log
from rebalance.control import ControlState

__all__ = ["ControlLog", "record_key"]

log = logging.getLogger(__name__)


def record_key(record: Mapping[str, Any]) -> bytes:
    """The compaction key of a control record."""
    kind = str(record["type"])
    if kind == "generation":
        return f"generation/{int(record['generation'])}".encode()
    return kind.encode()


class ControlLog:
    """Read and append the control log of one app."""

    def __init__(self, client: Mapping[str, Any], admin: AdminClient, topic: str) -> None:
        self._client = dict(client)
        self._admin = admin
        self.topic = topic

    def ensure_topic(self) -> None:
        """Create the control log topic when missing."""
        ensure_topics(self._admin, [TopicSpec(self.topic, 1, config=COMPACTED)])

    def read(self) -> ControlState:
        """Apply every record, in order."""
        state = ControlState()
        for _key, value in read_log(self._client, self.topic):
            if value is None:
                continue
            before = len(state.ignored)
            state = state.apply(orjson.loads(value))
            if len(state.ignored) > before:
                log.warning("control log %s: ignored %s", self.topic, state.ignored[-1])
        return state

    def append(self, *records: Mapping[str, Any]) -> None:
        """Write ``records`` and wait until they are stored."""
        producer = Producer({**self._client, "enable.idempotence": True})
        append(producer, self.topic, [(record_key(r), orjson.dumps(dict(r))) for r in records])

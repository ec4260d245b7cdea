"""Following the control log as it grows, without re-reading it (one consumer, no group)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from rebalance.control import ControlState

__all__ = ["ControlWatcher"]

log = logging.getLogger(__name__)


class ControlWatcher:
    """Applies new control-log records to a ``ControlState`` whenever ``poll`` is called."""

    def __init__(self, client: Mapping[str, Any], topic: str) -> None:
        self.topic = topic
        self.state = ControlState()
        self._consumer = Consumer(
            {
                **client,
                "group.id": f"splitstate-control-{uuid.uuid4().hex[:12]}",
                "enable.auto.commit": False,
            }
        )
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def poll(self, timeout: float = 0.0) -> bool:
        """Apply what arrived; returns whether the state changed."""
        changed = False
        while True:
            messages = self._consumer.consume(num_messages=500, timeout=timeout)
            if not messages:
                return changed
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("control log %s: %s", self.topic, error)
                    continue
                value = message.value()
                if value is None:
                    continue
                before = self.state
                self.state = before.apply(orjson.loads(value))
                if len(self.state.ignored) > len(before.ignored):
                    log.warning("control log %s: ignored %s", self.topic, self.state.ignored[-1])
                changed = changed or self.state != before
            timeout = 0.0

    def catch_up(self, end_offset: int, timeout: float = 30.0) -> None:
        """Poll until every record before ``end_offset`` was applied."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll(0.2)
            position = self._consumer.position([TopicPartition(self.topic, 0)])[0].offset
            if position >= end_offset:
                return

    def end_offset(self) -> int:
        """The control log's current end."""
        _low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=30)
        return int(high)

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()

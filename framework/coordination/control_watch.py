"""Following the control log as it grows, without re-reading it (one consumer, no group).

``catch_up`` reads to a given end offset or raises: a processor never computes ownership from
part of the log. Once ``record_in`` names the processor's database, every change is noted
there (the highest generation seen and how far the log was read), so a later start can tell
a control log that lost records (``framework.coordination.control_guard``).
"""

from __future__ import annotations

import logging
import time
import uuid

import orjson

from framework.coordination.control_guard import remember
from framework.kafka import Kafka, KafkaIOError
from rebalance.control import ControlState
from statestore import ProcessorDatabase

__all__ = ["ControlWatcher"]

log = logging.getLogger(__name__)


class ControlWatcher:
    """Applies new control-log records to a ``ControlState`` whenever ``poll`` is called."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self.topic = topic
        self.state = ControlState()
        self._consumer = kafka.consumer(
            f"splitstate-control-{uuid.uuid4().hex[:12]}", name=f"control log {topic}"
        )
        self._consumer.assign({(topic, 0): None})
        self._database: ProcessorDatabase | None = None

    def record_in(self, database: ProcessorDatabase) -> None:
        """Note what was read in ``database`` now and after every change."""
        self._database = database
        self._remember()

    def _remember(self) -> None:
        if self._database is not None:
            remember(self._database, self.topic, self.state, self.position())

    def position(self) -> int:
        """The offset of the next record to read."""
        return max(self._consumer.position((self.topic, 0)) or 0, 0)

    def poll(self, timeout: float = 0.0) -> bool:
        """Apply what arrived; returns whether the state changed."""
        changed = False
        while True:
            messages = self._consumer.consume(500, timeout)
            if not messages:
                return changed
            for message in messages:
                value = message.value()
                if value is None:
                    continue
                before = self.state
                self.state = before.apply(orjson.loads(value))
                if len(self.state.ignored) > len(before.ignored):
                    log.warning("control log %s: ignored %s", self.topic, self.state.ignored[-1])
                changed = changed or self.state != before
            if changed:
                self._remember()
            timeout = 0.0

    def catch_up(self, end_offset: int, timeout: float = 30.0) -> None:
        """Poll until every record before ``end_offset`` was applied.

        Raises ``KafkaIOError`` when that takes longer than ``timeout`` seconds: ownership
        computed from part of the log could give a partition to two processors.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.poll(0.2)
            position = self.position()
            if position >= end_offset:
                return
            if time.monotonic() >= deadline:
                raise KafkaIOError(
                    f"could not read control log {self.topic!r} to its end within "
                    f"{timeout:.0f}s: read to offset {position} of {end_offset}. A processor "
                    "acts only on the whole log. Fix: make Kafka reachable (check "
                    "kafka.bootstrap_servers and the broker), then start the processor again."
                )

    def end_offset(self) -> int:
        """The control log's current end."""
        position = (self.topic, 0)
        return self._consumer.watermarks([position])[position].end

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()

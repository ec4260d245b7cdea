"""The receiving side of the catch-up protocol (KIP-287): build the gained keys' state.

A processor that gains partitions in a scale reads S2 (its S1 partitions plus their
ancestors) from T2 (its own progress, initially the beginning), keeps the records whose key
now belongs to it (``bucket(key_hash, B, P') == J``) and applies the processor function in
restore mode (no outputs, no dead letters). It never reads a moved partition past T1, the old
owner's committed offset, so nothing it applies can be a record the old owner has not
emitted; once the old owner released the partition at F, it reads exactly up to F. Before the
first record it deletes any state it holds for the gained keys (left from an earlier
membership): gained keys are always rebuilt from empty.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from framework.processing import ProcessorStoppedError, RecordProcessor
from rebalance import bucket, key_hash
from rebalance.control import Handoff, Scale
from statestore import ProcessorDatabase

__all__ = ["CatchUp"]

log = logging.getLogger(__name__)

Position = tuple[str, int]
_REFRESH_SECONDS = 0.5


class CatchUp:
    """Rebuilds processor ``processor``'s gained keys for one scale generation."""

    def __init__(
        self,
        processor: int,
        initial_processors: int,
        scale: Scale,
        *,
        client: Mapping[str, Any],
        group_id: str,
        database: ProcessorDatabase,
        records: RecordProcessor,
    ) -> None:
        self.processor = processor
        self.generation = scale.generation
        self.scope = f"catchup-{scale.generation}"
        plan = scale.receivers[processor]
        self.s1: set[Position] = set(plan.s1)
        self.bounds: dict[Position, int | None] = {
            (read.topic, read.partition): read.end_offset for read in plan.s2
        }
        self._database = database
        self._records = records
        b, old, new = initial_processors, scale.old_processors, scale.new_processors

        def belongs(key: bytes) -> bool:
            return bucket(key_hash(key), b, new) == processor

        def gained(key: bytes) -> bool:
            return belongs(key) and bucket(key_hash(key), b, old) != processor

        self._belongs: Callable[[bytes], bool] = belongs
        self._clear_stale(gained)
        self._consumer = Consumer({**client, "group.id": group_id, "enable.auto.commit": False})
        progress = database.progress(self.scope)
        self.positions: dict[Position, int] = {}
        lost: list[str] = []
        for position in self.bounds:
            low, _high = self._consumer.get_watermark_offsets(TopicPartition(*position), timeout=30)
            if low > progress.get(position, 0):
                lost.append(f"{position[0]}[{position[1]}] starts at offset {low}")
            self.positions[position] = max(progress.get(position, low), low)
        if lost:
            self._consumer.close()
            raise ProcessorStoppedError(
                f"processor {processor} cannot rebuild the keys it gains in generation "
                f"{scale.generation}: their history is no longer complete in Kafka ("
                f"{'; '.join(lost)}: retention deleted earlier records). Building state from "
                "partial history would be wrong, so it stops. Fix: keep the whole history "
                "(retention.ms=-1 on input topics of stateful apps), or rebuild from an archive "
                "with `splitstate backfill` once it exists."
            )
        self._consumer.assign(
            [TopicPartition(t, p, progress.get((t, p), OFFSET_BEGINNING)) for t, p in self.bounds]
        )
        self.t1: dict[Position, int] = {}
        self.released: dict[Position, int] = {}
        self._paused: set[Position] = set()
        self._refreshed = 0.0
        self.applied = 0
        self.replayed = 0
        self.started = time.monotonic()
        self.refresh()
        log.info(
            "processor %d: catching up for generation %d: S1 %s, S2 %s, from %s",
            processor,
            self.generation,
            sorted(self.s1),
            sorted(self.bounds),
            self.positions,
        )

    def _clear_stale(self, gained: Callable[[bytes], bool]) -> None:
        flag = f"{self.scope}-cleared"
        if self._database.has_flag(flag):
            return
        deleted = self._database.delete_keys(gained)
        batch = self._database.begin()
        batch.set_flag(flag)
        batch.commit()
        if deleted:
            log.info(
                "processor %d: deleted %d stale keys before catching up", self.processor, deleted
            )

    def release(self, handoff: Handoff) -> None:
        """The old owner released ``handoff``'s partitions at F: read them exactly to F."""
        for position, final in handoff.released.items():
            self.released[position] = final
        self._resume_ready()

    def limit(self, position: Position) -> int | None:
        """How far ``position`` may be read now (``None``: no limit)."""
        if position in self.released:
            return self.released[position]
        if position in self.s1:
            return self.t1.get(position, self.positions[position])
        return self.bounds.get(position)

    def refresh(self, force: bool = False) -> None:
        """Re-read T1 (the consumer group's committed offsets of S1) every half second."""
        now = time.monotonic()
        if not force and now - self._refreshed < _REFRESH_SECONDS:
            return
        self._refreshed = now
        pending = [TopicPartition(t, p) for t, p in self.s1 if (t, p) not in self.released]
        if pending:
            for tp in self._consumer.committed(pending, timeout=30):
                if tp.offset >= 0:
                    self.t1[(tp.topic, tp.partition)] = tp.offset
        self._resume_ready()

    def _resume_ready(self) -> None:
        for position in list(self._paused):
            limit = self.limit(position)
            if limit is None or self.positions[position] < limit:
                self._consumer.seek(TopicPartition(*position, self.positions[position]))
                self._consumer.resume([TopicPartition(*position)])
                self._paused.discard(position)

    def step(self, max_records: int, timeout: float = 0.05) -> int:
        """Read and apply up to ``max_records`` records; returns how many were read."""
        self.refresh()
        messages = self._consumer.consume(num_messages=max_records, timeout=timeout)
        if not messages:
            return 0
        batch = self._database.begin()
        read = 0
        moved: dict[Position, int] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("catch-up consumer: %s", error)
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                continue
            position = (topic, partition)
            if position in self._paused or offset < self.positions[position]:
                continue
            limit = self.limit(position)
            if limit is not None and offset >= limit:
                self._consumer.pause([TopicPartition(topic, partition)])
                self._paused.add(position)
                continue
            key = message.key()
            if key is not None and self._belongs(key):
                self._records.process(batch, message, topic, partition, offset, restore=True)
                self.applied += 1
            self.positions[position] = offset + 1
            moved[position] = offset + 1
            read += 1
        self.replayed += read
        for (topic, partition), next_offset in moved.items():
            batch.set_progress(self.scope, topic, partition, next_offset)
        batch.commit()
        self._resume_ready()
        return read

    def lag(self) -> dict[Position, int]:
        """T1 - T2 per S1 partition (F - T2 once released)."""
        return {
            position: max(0, (self.limit(position) or 0) - self.positions[position])
            for position in sorted(self.s1)
        }

    def caught_up(self, handoff: Handoff, max_lag: int) -> bool:
        """Whether ``handoff``'s partitions (and every bounded ancestor) are within ``max_lag``."""
        ancestors_done = all(
            self.positions[p] >= bound
            for p, bound in self.bounds.items()
            if p not in self.s1 and bound is not None
        )
        lag = self.lag()
        return ancestors_done and all(lag[p] <= max_lag for p in handoff.partitions)

    def finished(self, handoff: Handoff) -> bool:
        """Whether every partition of a released ``handoff`` was read exactly to F."""
        return all(
            p in self.released and self.positions[p] >= self.released[p] for p in handoff.partitions
        )

    def complete(self, handoff: Handoff) -> None:
        """Make ``handoff``'s partitions input partitions of this processor, from F.

        The catch-up progress stays at F, so a crash before COMPLETE reaches the control log
        finds the catch-up finished and completes again instead of replaying.
        """
        batch = self._database.begin()
        for (topic, partition), final in handoff.released.items():
            batch.set_offset(topic, partition, final)
        batch.commit()
        for position in handoff.partitions:
            self.s1.discard(position)

    def close(self) -> None:
        """Stop reading."""
        self._consumer.close()

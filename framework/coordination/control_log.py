"""The app's control log on Kafka: a compacted single-partition topic of JSON records.

Records are applied in order to ``rebalance.ControlState`` (pure and deterministic), so every
reader agrees.

Every record gets its own key: a readable prefix naming the fact (``scale/3``,
``handoff/3/0/2/CAUGHT_UP``, ``app``, ``generation/0``) plus a random id. A key per *fact*
is not enough, because a fact can be written twice: a processor whose append timed out after
the write landed restarts and writes it again, two first starts race to write ``app``, two
``scale`` requests race. Compaction keeps only the last record of a key, at the position of
that last copy, so a shared key would move the fact past the records that followed its first
copy (a RELEASE would then come before the CAUGHT_UP it answered, and be ignored), and the
replay would change. With a key per record compaction removes nothing, and the log replays
to the same state however much of it was compacted.

The topic is created compacted with ``retention.ms=-1`` and ``retention.bytes=-1``, and
``framework.kafka.check_retention`` refuses to use it (or the topic registry) when its
config would delete records.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from framework.kafka import COMPACTED, Kafka, KafkaIOError, TopicSpec, UnknownPartitionError
from rebalance.control import ControlState

__all__ = ["ControlLog", "record_key"]

log = logging.getLogger(__name__)


def record_key(record: Mapping[str, Any]) -> bytes:
    """A new compaction key for one write of ``record``: its fact, then a random id."""
    kind = str(record["type"])
    if kind in ("generation", "scale"):
        fact = f"{kind}/{int(record['generation'])}"
    elif kind == "handoff":
        fact = (
            f"handoff/{int(record['generation'])}/{int(record['source'])}/"
            f"{int(record['target'])}/{record['event']}"
        )
    elif kind in ("growth", "growth_done"):
        fact = f"{kind}/{record['topic']}/{int(record['partitions'])}"
    else:
        fact = kind
    return f"{fact}/{uuid.uuid4().hex}".encode()


class ControlLog:
    """Read and append the control log of one app (topic ``topic``), through ``kafka``."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self._kafka = kafka
        self.topic = topic

    def ensure_topic(self) -> None:
        """Create the control log topic when missing (compacted, never deleting records)."""
        self._kafka.create_topics([TopicSpec(self.topic, 1, config=COMPACTED)])

    def read(self) -> ControlState:
        """Apply every record, in order."""
        return self.outcome(None)[0]

    def outcome(self, request: str | None) -> tuple[ControlState, str | None]:
        """The state after every record, and why the record of ``request`` was ignored.

        The reason is ``None`` when that record was applied (or is not in the log).
        """
        state = ControlState()
        reason = None
        for _key, value in self._kafka.read_log(self.topic):
            if value is None:
                continue
            record = orjson.loads(value)
            before = len(state.ignored)
            state = state.apply(record)
            if len(state.ignored) > before:
                log.warning("control log %s: ignored %s", self.topic, state.ignored[-1])
                if request is not None and record.get("request") == request:
                    reason = state.ignored[-1]
        return state, reason

    def end_offset(self) -> int:
        """The log's end offset (0 when the topic is missing or empty)."""
        position = (self.topic, 0)
        try:
            with self._kafka.consumer(f"splitstate-reader-{uuid.uuid4().hex[:12]}") as consumer:
                high = consumer.watermarks([position])[position].end
        except UnknownPartitionError:
            return 0
        except KafkaIOError as error:
            raise KafkaIOError(
                f"could not read the end offset of {self.topic!r}: {error}. Fix: make Kafka "
                "reachable."
            ) from None
        return max(int(high), 0)

    def append(self, *records: Mapping[str, Any]) -> None:
        """Write ``records`` and wait until they are stored."""
        self._kafka.append(self.topic, [(record_key(r), orjson.dumps(dict(r))) for r in records])

"""The app's control log on Kafka: a compacted single-partition topic of JSON records.

Records are applied in order to ``rebalance.ControlState`` (pure and deterministic), so every
reader agrees. Reading and following are one thing here: ``ControlLog.read`` replays the log
to its end once (the CLI, ``status``, a scale request); ``ControlWatcher`` (one consumer, no
group) follows it as it grows, applying each new record to the same state. ``catch_up``
reads to a given end offset or raises: a processor never computes ownership from part of the
log. Once ``record_in`` names the processor's database, every change is noted there (the
highest generation seen and how far the log was read), so a later start can tell a control
log that lost records (``framework.coordination.control_guard``).

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
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from framework.coordination.control_guard import remember
from framework.errors import SplitstateError
from framework.kafka import (
    COMPACTED,
    Kafka,
    KafkaIOError,
    Message,
    TopicSpec,
    UnknownPartitionError,
)
from rebalance.control import ControlState
from rebalance.control_stops import CONTROL_FORMAT
from statestore import ProcessorDatabase

__all__ = ["ControlLog", "ControlWatcher", "record_key"]

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


def _apply(state: ControlState, value: bytes, topic: str, *, live: bool = False) -> ControlState:
    """``state`` with the record ``value`` applied. An ignored record is logged as a warning
    when ``live`` (read as it arrives), else at DEBUG: a replay meets every past refusal
    again, which ``ControlState.ignored`` keeps (``status`` lists the last ones). Raises
    ``SplitstateError`` once the log switches to a format this splitstate cannot read."""
    try:
        record = orjson.loads(value)
    except orjson.JSONDecodeError:
        record = {"type": None, "raw": value[:80].decode(errors="replace")}
    after = state.apply(record if isinstance(record, dict) else {"type": None})
    if len(after.ignored) > len(state.ignored):
        level = logging.WARNING if live else logging.DEBUG
        log.log(level, "control log %s: ignored %s", topic, after.ignored[-1])
    if after.unreadable is not None:
        raise SplitstateError(
            f"control log {topic!r} is written in format {after.unreadable}, which this "
            f"splitstate cannot read (it reads up to {CONTROL_FORMAT}); acting on part of it "
            "could give a partition to two processors. Fix: upgrade splitstate to the version "
            "the other processors of this app run."
        )
    return after


class ControlLog:
    """Read and append the control log of one app (topic ``topic``), through ``kafka``."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self._kafka = kafka
        self.topic = topic

    def topic_spec(self) -> TopicSpec:
        """The control log topic: one partition, compacted, never deleting records."""
        return TopicSpec(self.topic, 1, config=COMPACTED)

    def ensure_topic(self) -> None:
        """Create the control log topic when missing (compacted, never deleting records)."""
        self._kafka.create_topics([self.topic_spec()])

    def read(self) -> ControlState:
        """Apply every record, in order."""
        return self.outcome(None)[0]

    def outcome(self, request: str | None) -> tuple[ControlState, str | None]:
        """The state after every record, and why the record of ``request`` was ignored.

        The reason is ``None`` when that record was applied (or is not in the log).
        """
        state = ControlState()
        reason = None
        for _offset, _key, value in self._kafka.read_log(self.topic):
            if value is None:
                continue
            before = len(state.ignored)
            state = _apply(state, value, self.topic)
            ignored = len(state.ignored) > before
            if ignored and request is not None and orjson.loads(value).get("request") == request:
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

    def watch(self) -> ControlWatcher:
        """A ``ControlWatcher`` following this log from its start."""
        return ControlWatcher(self._kafka, self.topic)

    def append(self, *records: Mapping[str, Any]) -> int:
        """Write ``records`` and wait until they are stored; returns the offset after the
        last (the log reaches at least that far)."""
        return self._kafka.append(
            self.topic, [(record_key(r), orjson.dumps(dict(r))) for r in records]
        )


class ControlWatcher:
    """Applies new control-log records to a ``ControlState`` whenever ``poll`` is called."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self.topic = topic
        self.state = ControlState()
        self._clock = kafka.clock
        self._consumer = kafka.consumer(
            f"splitstate-control-{uuid.uuid4().hex[:12]}", name=f"control log {topic}"
        )
        self._consumer.assign({(topic, 0): None})
        self._database: ProcessorDatabase | None = None
        self._listeners: list[Callable[[ControlState], None]] = []
        #: records are read as they arrive once a ``catch_up`` read the log's past
        self._live = False

    def on_change(self, listener: Callable[[ControlState], None]) -> None:
        """Call ``listener(state)`` now and after every record that changes the state (an
        exception from a later call is logged, not raised)."""
        self._listeners.append(listener)
        listener(self.state)

    def record_in(self, database: ProcessorDatabase) -> None:
        """Note what was read in ``database`` now and after every change."""
        self._database = database
        self._remember()

    def _remember(self) -> None:
        if self._database is not None:
            remember(self._database, self.topic, self.state, self.position())

    def remember_written(self, end: int) -> None:
        """Note in the database that the log reaches at least ``end``, the offset after a
        record this processor wrote and acts on before reading it back (its COMPLETE: what
        ``ControlLog.append`` returned): that record is then proved to exist, and a log
        restored from before it is refused at the next start.

        Not the log's end from Kafka: that request waits behind this watcher's own fetch of
        the log, which the broker holds up to ``fetch.wait.max.ms`` (500 ms) while the log
        is idle (it answers one connection's requests in order), and a takeover waited for
        it; asked only when ``end`` is unknown (0: delivery reports without offsets)."""
        if self._database is not None:
            remember(self._database, self.topic, self.state, end or self.end_offset())

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
            changed = self._apply_all(messages) or changed
            timeout = 0.0

    def _apply_all(self, messages: list[Message]) -> bool:
        """Apply ``messages`` in order; returns whether the state changed."""
        changed = False
        for message in messages:
            value = message.value()
            if value is None:
                continue
            before = self.state
            self.state = _apply(before, value, self.topic, live=self._live)
            changed = changed or self.state != before
        if changed:
            self._remember()
            self._tell_listeners()
        return changed

    def _tell_listeners(self) -> None:
        """Call every listener with the state; one that raises is logged and the others are
        still called (the state is applied already, and reading the log goes on)."""
        for listener in self._listeners:
            try:
                listener(self.state)
            except Exception:
                name = getattr(listener, "__qualname__", None) or repr(listener)
                log.warning(
                    "a listener of control log %r (%s) raised; the change was applied and "
                    "the other listeners are still told",
                    self.topic,
                    name,
                    exc_info=True,
                )

    def catch_up(self, end_offset: int, timeout: float = 30.0) -> None:
        """Poll until every record before ``end_offset`` was applied.

        Raises ``KafkaIOError`` when that takes longer than ``timeout`` seconds: ownership
        computed from part of the log could give a partition to two processors.
        """
        deadline = self._clock.monotonic() + timeout
        while True:
            position = self.position()
            if position >= end_offset:
                self._live = True
                return
            if self._clock.monotonic() >= deadline:
                raise KafkaIOError(
                    f"could not read control log {self.topic!r} to its end within "
                    f"{timeout:.0f}s: read to offset {position} of {end_offset}. A processor "
                    "acts only on the whole log. Fix: make Kafka reachable (check "
                    "kafka.bootstrap_servers and the broker), then start the processor again."
                )
            # asks for exactly the records missing, so the consume returns once they are
            # there instead of waiting out its timeout for a fuller batch
            self._apply_all(self._consumer.consume(min(500, end_offset - position), 0.2))

    def end_offset(self) -> int:
        """The control log's current end."""
        position = (self.topic, 0)
        return self._consumer.watermarks([position])[position].end

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()

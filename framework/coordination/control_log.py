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

**A record no reader can read** (not JSON, not an object, or a known kind that does not fit
its schema: ``rebalance.control_schema``) stops every reader at it the same way: each
processor (at its start, or as the record arrives), ``status``, ``scale`` and ``expand``
raise ``ControlRecordError`` naming the topic, the record's offset and key, and the fix.
Nothing acts on the log past it, because skipping it could change who owns a partition
for one reader and not another. An operator removes it with ``splitstate control drop``,
which writes a tombstone of its key (refused for a record that can be read): from then on
every reader skips it, as compaction will remove it anyway. A reader meeting a refused
record therefore looks for a later tombstone of its key before it refuses: whether a
record applies depends only on the log, not on when it was read.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from framework.coordination.control_guard import remember
from framework.errors import SplitstateError
from framework.kafka import (
    COMPACTED,
    Kafka,
    KafkaIOError,
    LogRecord,
    Message,
    TopicSpec,
    UnknownPartitionError,
)
from rebalance.control import ControlState
from rebalance.control_schema import check_record
from rebalance.control_stops import CONTROL_FORMAT
from rebalance.record_checks import MalformedRecordError, json_object, shown
from statestore import ProcessorDatabase

__all__ = ["ControlLog", "ControlRecordError", "ControlWatcher", "record_key", "why_unreadable"]

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
    elif kind == "growth_base":
        fact = f"{kind}/{record['topic']}/{int(record['partition'])}/{int(record['start'])}"
    else:
        fact = kind
    return f"{fact}/{uuid.uuid4().hex}".encode()


class ControlRecordError(SplitstateError):
    """A control-log record no reader can read: every reader stops at it until it is
    removed (``splitstate control drop``)."""

    def __init__(self, topic: str, offset: int, key: bytes | None, problem: str) -> None:
        self.topic, self.offset, self.key = topic, offset, key
        super().__init__(
            f"control log {topic!r} holds a record that cannot be read, at offset {offset} "
            f"(key {shown(key)}): {problem}. Every processor, `splitstate status`, `scale` "
            "and `expand` stop at it the same way: acting on the log without it could give "
            "a partition to two processors. Fix: if a newer splitstate wrote it, run that "
            "version everywhere; otherwise remove it with `splitstate control drop "
            f"MODULE:APP --offset {offset}` (a tombstone of its key, which every reader then "
            "skips)."
        )


def why_unreadable(value: bytes) -> str | None:
    """Why the control-log record ``value`` cannot be read (``None``: it can)."""
    try:
        check_record(json_object(value))
    except MalformedRecordError as problem:
        return str(problem)
    return None


def _apply(
    state: ControlState,
    record: LogRecord,
    topic: str,
    removed: Callable[[LogRecord], bool],
    *,
    live: bool = False,
) -> ControlState:
    """``state`` with ``record`` (not a tombstone) applied. A record that cannot be read
    raises ``ControlRecordError``, unless ``removed(record)`` says a later tombstone of its
    key removed it (then it is skipped). An ignored record is logged as a warning when
    ``live`` (read as it arrives), else at DEBUG: a replay meets every past refusal again,
    which ``ControlState.ignored`` keeps (``status`` lists the last ones). Raises
    ``SplitstateError`` once the log switches to a format this splitstate cannot read."""
    assert record.value is not None
    try:
        after = state.apply(json_object(record.value))
    except MalformedRecordError as problem:
        if removed(record):
            log.log(
                logging.WARNING if live else logging.DEBUG,
                "control log %s: skipped the record at offset %d, which cannot be read and "
                "whose key a later tombstone removed",
                topic,
                record.offset,
            )
            return state
        raise ControlRecordError(topic, record.offset, record.key, str(problem)) from None
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


def _removed_in(records: Sequence[LogRecord]) -> Callable[[LogRecord], bool]:
    """Whether a record of ``records`` was removed: a tombstone of its key comes later."""
    last_tombstone: dict[bytes | None, int] = {}
    for record in records:
        if record.value is None:
            last_tombstone[record.key] = record.offset
    return lambda record: last_tombstone.get(record.key, -1) > record.offset


def _request(value: bytes) -> str | None:
    """The ``request`` id of a record that was read (``None``: it names none)."""
    request = json_object(value).get("request")
    return request if isinstance(request, str) else None


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
        """Apply every record, in order (``ControlRecordError`` at one no reader can read)."""
        return self.outcome(None)[0]

    def outcome(self, request: str | None) -> tuple[ControlState, str | None]:
        """The state after every record, and why the record of ``request`` was ignored.

        The reason is ``None`` when that record was applied (or is not in the log). Raises
        ``ControlRecordError`` at a record no reader can read.
        """
        records = self._kafka.read_log(self.topic)
        removed = _removed_in(records)
        state = ControlState()
        reason = None
        for record in records:
            if record.value is None:
                continue
            before = len(state.ignored)
            state = _apply(state, record, self.topic, removed)
            ignored = len(state.ignored) > before
            if ignored and request is not None and _request(record.value) == request:
                reason = state.ignored[-1]
        return state, reason

    def drop(self, offset: int) -> bytes:
        """Remove the record at ``offset``, one no reader can read: append a tombstone of
        its key, after which every reader skips it; returns the key. Raises
        ``SplitstateError`` (removing nothing) when no such record is there, or when it can
        be read: a fact of the protocol is never removed."""
        records = self._kafka.read_log(self.topic)
        found = next((r for r in records if r.offset == offset), None)
        if found is None or found.value is None or found.key is None:
            what = "no record" if found is None else "a tombstone or a keyless record"
            raise SplitstateError(
                f"control log {self.topic!r} holds {what} at offset {offset}; nothing was "
                "dropped. Fix: give the offset that `splitstate status` (or the processors' "
                "error) names."
            )
        problem = why_unreadable(found.value)
        if problem is None:
            raise SplitstateError(
                f"the record at offset {offset} of control log {self.topic!r} can be read: it "
                "is a fact of the protocol, and removing it could give a partition to two "
                "processors; nothing was dropped. Fix: drop only the record the processors' "
                "error names."
            )
        if _removed_in(records)(found):
            return found.key
        self._kafka.append(self.topic, [(found.key, None)])
        return found.key

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
        self._kafka = kafka
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
            record = LogRecord(message.offset() or 0, message.key(), value)
            self.state = _apply(before, record, self.topic, self._removed, live=self._live)
            changed = changed or self.state != before
        if changed:
            self._remember()
            self._tell_listeners()
        return changed

    def _removed(self, record: LogRecord) -> bool:
        """Whether a tombstone of ``record``'s key follows it in the log now (asked only of
        a record that cannot be read: the log is read once more to its end)."""
        return _removed_in(self._kafka.read_log(self.topic))(record)

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

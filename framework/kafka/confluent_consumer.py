"""The port's consumer over confluent-kafka, and how confluent-kafka's errors become ours."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as ConfluentMessage

from framework.kafka.client_logs import with_logger
from framework.kafka.errors import (
    ConsumerFailedError,
    KafkaIOError,
    OffsetResetError,
    UnknownPartitionError,
)
from framework.kafka.port import KafkaConsumer, Message
from rebalance.positions import OffsetRange, Position

__all__ = ["ConfluentConsumer", "io_error"]

log = logging.getLogger(__name__)

#: How long a request to the broker may take.
TIMEOUT = 30.0
#: How long ``watermarks`` asks again while a partition has no leader (a new topic's).
_LEADER_WAIT_SECONDS = 10.0
#: How long a consumer waits for metadata before its first assignment (see ``_connect``).
_CONNECT_SECONDS = 1.0
#: how long ``committed`` waits before asking again for partitions answered with an error
_RETRY_SECONDS = 0.1
#: how long a synchronous ``commit`` asks again while the group's coordinator is away
COMMIT_RETRY_SECONDS = 10.0
#: the commit errors that mean "the coordinator is loading, moving or slow: ask again"
#: (librdkafka retries them itself only twice, ``retry.backoff.ms`` apart: 30 ms at the
#: 10 ms splitstate's consumers set)
_COMMIT_AGAIN = (
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
)
_UNKNOWN = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)
_NO_LEADER = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def io_error(error: KafkaException, message: str | None = None) -> KafkaIOError:
    """Our error for ``error`` (its text, or ``message``): ``UnknownPartitionError`` when it
    says the topic or partition does not exist."""
    kafka_error = error.args[0] if error.args else None
    unknown = isinstance(kafka_error, KafkaError) and kafka_error.code() in _UNKNOWN
    kind = UnknownPartitionError if unknown else KafkaIOError
    return kind(str(error) if message is None else message)


def _partitions(positions: Iterable[Position]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for topic, partition in positions]


def _starts(starts: Mapping[Position, int | None]) -> list[TopicPartition]:
    return [
        TopicPartition(topic, partition, OFFSET_BEGINNING if offset is None else offset)
        for (topic, partition), offset in starts.items()
    ]


class ConfluentConsumer(KafkaConsumer):
    """``KafkaConsumer`` over a confluent-kafka ``Consumer`` of ``settings``.

    ``name``: how log lines name it. ``strict`` (reading a log to its end): any error event
    raises (and sets ``failed``). Reaching a partition's end is noted in ``ended``.
    """

    def __init__(self, settings: Mapping[str, object], name: str, strict: bool = False) -> None:
        try:
            self._consumer = Consumer(with_logger(settings))
        except KafkaException as error:
            raise io_error(error) from None
        self._name = name
        self._strict = strict
        self.ended: set[Position] = set()
        self.failed = False
        self._connected = False  # whether a request to the broker was answered

    def _connect(self, starts: Mapping[Position, int | None]) -> None:
        """Before the first assignment, ask for the metadata of one of its topics: a
        partition assigned while the client has no broker up yet is first fetched half a
        second later (librdkafka's retry), whereas once a broker is up it is fetched at once.
        Asked once, briefly: a failure is left to the reads that follow (they report it,
        within their own deadlines)."""
        if self._connected or not starts:
            return
        self._connected = True
        topic = next(iter(starts))[0]
        try:
            self._consumer.list_topics(topic, timeout=_CONNECT_SECONDS)
        except KafkaException:
            return

    def assign(self, starts: Mapping[Position, int | None]) -> None:
        """Read exactly these partitions, each from its offset (``None``: its beginning)."""
        self._connect(starts)
        try:
            self._consumer.assign(_starts(starts))
        except KafkaException as error:
            raise io_error(error) from None

    def add(self, starts: Mapping[Position, int | None]) -> None:
        """Also read these partitions, each from its offset (``None``: its beginning)."""
        self._connect(starts)
        try:
            self._consumer.incremental_assign(_starts(starts))
        except KafkaException as error:
            raise io_error(error) from None

    def remove(self, positions: Iterable[Position]) -> None:
        """Stop reading these partitions."""
        try:
            self._consumer.incremental_unassign(_partitions(positions))
        except KafkaException as error:
            raise io_error(error) from None

    def consume(self, max_records: int, timeout: float) -> list[Message]:
        """Up to ``max_records`` records (see ``KafkaConsumer.consume``).

        librdkafka returns when ``max_records`` arrived or ``timeout`` passed, whichever is
        first: a batch fills for up to ``timeout`` (the loop's ``batch.max_wait_ms``).
        """
        try:
            messages = self._consumer.consume(num_messages=max_records, timeout=timeout)
        except KafkaException as error:
            raise io_error(error) from None
        return self._checked(messages)

    def consume_ready(self, max_records: int, timeout: float) -> list[Message]:
        """Up to ``max_records`` records, returned as soon as any is there (or a partition's
        end is reached): waits at most ``timeout`` for the first, never for a batch to fill."""
        try:
            first = self._consumer.poll(timeout)
            messages = [] if first is None else [first]
            if max_records > 1 and first is not None:
                messages += self._consumer.consume(num_messages=max_records - 1, timeout=0)
        except KafkaException as error:
            raise io_error(error) from None
        return self._checked(messages)

    def _checked(self, messages: list[ConfluentMessage]) -> list[Message]:
        """The records among ``messages``; error events are noted, logged or raised."""
        records: list[Message] = []
        for message in messages:
            problem = message.error()
            if problem is None:
                records.append(message)
            elif problem.code() == KafkaError._PARTITION_EOF:
                topic, partition = message.topic(), message.partition()
                if topic is not None and partition is not None:
                    self.ended.add((topic, partition))
            elif self._strict:
                self.failed = True
                raise KafkaIOError(f"{self._name}: {problem}")
            elif problem.fatal():
                raise ConsumerFailedError(f"Kafka consumer failed: {problem}")
            elif problem.code() == KafkaError._AUTO_OFFSET_RESET:
                raise OffsetResetError(f"{self._name}: {problem}", problem.str())
            else:
                log.warning("%s: %s", self._name, problem)
        return records

    def seek(self, position: Position, offset: int) -> None:
        """Read ``position`` on from ``offset``."""
        try:
            self._consumer.seek(TopicPartition(*position, offset))
        except KafkaException as error:
            raise io_error(error) from None

    def pause(self, positions: Iterable[Position]) -> None:
        """Stop fetching these partitions until ``resume``."""
        try:
            self._consumer.pause(_partitions(positions))
        except KafkaException as error:
            raise io_error(error) from None

    def resume(self, positions: Iterable[Position]) -> None:
        """Fetch these paused partitions again."""
        try:
            self._consumer.resume(_partitions(positions))
        except KafkaException as error:
            raise io_error(error) from None

    def position(self, position: Position) -> int | None:
        """The offset of the next record of ``position`` to consume."""
        try:
            (found,) = self._consumer.position(_partitions([position]))
        except KafkaException as error:
            raise io_error(error) from None
        return found.offset if found.offset >= 0 else None

    def committed(self, positions: Iterable[Position]) -> dict[Position, int]:
        """The group's committed offset of each partition that has one.

        A partition Kafka answered with an error of its own (e.g. UNSTABLE_OFFSET_COMMIT:
        offsets a transaction committed, not settled yet) is asked again, for up to
        ``TIMEOUT`` in all; then ``KafkaIOError`` names it. An error never reads as "no
        offset": a caller would take the group for one that never processed the partition.
        """
        wanted = _partitions(positions)
        result: dict[Position, int] = {}
        deadline = time.monotonic() + TIMEOUT
        while wanted:
            try:
                found = self._consumer.committed(
                    wanted, timeout=max(deadline - time.monotonic(), _RETRY_SECONDS)
                )
            except KafkaException as error:
                raise io_error(error) from None
            self._connected = True
            failed = [tp for tp in found if tp.error is not None]
            for tp in found:
                if tp.error is None and tp.offset >= 0:
                    result[(tp.topic, tp.partition)] = tp.offset
            if failed and time.monotonic() >= deadline:
                errors = ", ".join(f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in failed)
                raise KafkaIOError(
                    f"{self._name}: Kafka did not say the group's committed offsets within "
                    f"{TIMEOUT:.0f}s ({errors})"
                )
            if failed:
                time.sleep(_RETRY_SECONDS)
            wanted = [TopicPartition(tp.topic, tp.partition) for tp in failed]
        return result

    def commit(self, offsets: Mapping[Position, int], *, asynchronous: bool = False) -> None:
        """Commit these next offsets to the group.

        A synchronous commit the group's coordinator could not take (loading, moved, timed
        out: ``_COMMIT_AGAIN``) is sent again, for up to ``COMMIT_RETRY_SECONDS``; any other
        error, or one that stays, raises ``KafkaIOError``. Sending the same offsets again is
        harmless."""
        partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        if asynchronous:
            try:
                self._consumer.commit(offsets=partitions, asynchronous=True)
            except KafkaException as error:
                raise io_error(error) from None
            return
        deadline = time.monotonic() + COMMIT_RETRY_SECONDS
        while True:
            try:
                self._consumer.commit(offsets=partitions, asynchronous=False)
                return
            except KafkaException as error:
                kafka_error = error.args[0] if error.args else None
                code = kafka_error.code() if isinstance(kafka_error, KafkaError) else None
                if code not in _COMMIT_AGAIN or time.monotonic() >= deadline:
                    raise io_error(error) from None
                log.debug("%s: commit not taken (%s): asking again", self._name, error)
            time.sleep(_RETRY_SECONDS)

    def watermarks(self, positions: Iterable[Position]) -> dict[Position, OffsetRange]:
        """``[earliest retained, end)`` of each partition."""
        result: dict[Position, OffsetRange] = {}
        for topic, partition in positions:
            deadline = time.monotonic() + _LEADER_WAIT_SECONDS
            refreshed = False
            while True:
                try:
                    low, high = self._consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=TIMEOUT
                    )
                    break
                except KafkaException as error:
                    kafka_error = error.args[0] if error.args else None
                    code = kafka_error.code() if isinstance(kafka_error, KafkaError) else None
                    if code == KafkaError._UNKNOWN_PARTITION and not refreshed:
                        # a partition added since this consumer read the topic's metadata
                        # (a growth): read it again, once
                        refreshed = True
                        self._refresh_metadata(topic)
                        continue
                    # a topic created a moment ago may have no leader yet: ask again
                    if code not in _NO_LEADER or time.monotonic() >= deadline:
                        raise io_error(error) from None
                    time.sleep(0.1)
            result[(topic, partition)] = OffsetRange(low, high)
            self._connected = True
        return result

    def fetched_ends(self, positions: Iterable[Position]) -> dict[Position, int]:
        """End offsets from librdkafka's cache (the high watermark of the last fetch)."""
        result: dict[Position, int] = {}
        for topic, partition in positions:
            try:
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
            except KafkaException:
                continue  # not known here yet
            if high >= 0:  # OFFSET_INVALID (-1001) until a fetch answered
                result[(topic, partition)] = high
        return result

    def _refresh_metadata(self, topic: str) -> None:
        """Ask the broker for ``topic``'s metadata (librdkafka's cache takes the answer)."""
        try:
            self._consumer.list_topics(topic, timeout=TIMEOUT)
        except KafkaException as error:
            raise io_error(error) from None

    def group_metadata(self) -> object:
        """confluent-kafka's ``ConsumerGroupMetadata`` of this consumer."""
        try:
            return self._consumer.consumer_group_metadata()
        except KafkaException as error:
            raise io_error(error) from None

    def close(self) -> None:
        """Leave; the consumer is not used again."""
        self._consumer.close()

"""The port's producer over confluent-kafka."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as ConfluentMessage

from framework.kafka.confluent_consumer import io_error
from framework.kafka.errors import (
    KafkaIOError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
)
from framework.kafka.port import DeliveryCallback, DeliveryError, Header, KafkaProducer

__all__ = ["ConfluentProducer", "delivery_error", "producer_error"]

_METADATA_SECONDS = 5.0
# only these say that a newer producer of the same transactional id exists; an epoch error
# can also follow a transaction the broker aborted for its timeout (retried, not a stop)
_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED}

_Report = Callable[[KafkaError | None, ConfluentMessage], None]


def delivery_error(error: KafkaError) -> DeliveryError:
    """Our ``DeliveryError`` for confluent-kafka's ``error``."""
    return DeliveryError(
        reason=error.str(),
        text=str(error),
        too_large=error.code() == KafkaError.MSG_SIZE_TOO_LARGE,
        fatal=error.fatal(),
    )


def producer_error(error: BaseException, during: str) -> KafkaIOError:
    """Our error for a producer call that failed with ``error`` (confluent-kafka raises a
    fatal error from ``flush``/``poll`` as ``KafkaException``, or as a ``SystemError`` caused
    by one): fenced, transaction to abort, or anything else."""
    if not isinstance(error, KafkaException) and isinstance(error.__cause__, KafkaException):
        error = error.__cause__
    kafka_error = error.args[0] if error.args else None
    text = f"{during} failed: {error}"
    if isinstance(kafka_error, KafkaError):
        if kafka_error.code() in _FENCED:
            return ProducerFencedError(text)
        if kafka_error.txn_requires_abort() and not kafka_error.fatal():
            return TransactionAbortableError(text)
    return KafkaIOError(text)


def _produce_error(error: KafkaException) -> KafkaIOError:
    kafka_error = error.args[0] if error.args else None
    if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        return RecordTooLargeError(str(error), kafka_error.str())
    return io_error(error)


def _reporting(on_delivery: DeliveryCallback) -> _Report:
    def report(error: KafkaError | None, message: ConfluentMessage) -> None:
        on_delivery(None if error is None else delivery_error(error), message)

    return report


class ConfluentProducer(KafkaProducer):
    """``KafkaProducer`` over a confluent-kafka ``Producer``."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        # the last callback and its wrapper: a batch passes the same callback for each record
        self._reports: tuple[DeliveryCallback | None, _Report | None] = (None, None)

    def _report(self, on_delivery: DeliveryCallback) -> _Report:
        last, report = self._reports  # one read: another thread may replace the pair
        if last is on_delivery and report is not None:
            return report
        report = _reporting(on_delivery)
        self._reports = (on_delivery, report)
        return report

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        *,
        headers: Sequence[Header] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one record (see ``KafkaProducer.produce``)."""
        report = None if on_delivery is None else self._report(on_delivery)
        listed = headers if headers is None or isinstance(headers, list) else list(headers)
        try:
            if partition is None:
                self._producer.produce(topic, value, key, on_delivery=report, headers=listed)
            else:
                self._producer.produce(
                    topic, value, key, partition, on_delivery=report, headers=listed
                )
        except KafkaException as error:
            raise _produce_error(error) from None

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks."""
        try:
            return self._producer.poll(timeout)
        except (KafkaException, SystemError) as error:
            raise producer_error(error, "serving deliveries") from None

    def flush(self, timeout: float) -> int:
        """Wait for every queued record; returns how many are still queued."""
        try:
            return self._producer.flush(timeout)
        except (KafkaException, SystemError) as error:
            raise producer_error(error, "flushing") from None

    def partition_count(self, topic: str) -> int:
        """``topic``'s partition count in this producer's refreshed metadata."""
        try:
            metadata = self._producer.list_topics(topic, timeout=_METADATA_SECONDS)
        except KafkaException as error:
            raise io_error(error) from None
        return len(metadata.topics[topic].partitions)

    def close(self) -> None:
        """Drop librdkafka's producer: it is destroyed (its connections closed) now, not when
        the process ends. Not used again (see ``KafkaProducer.close``)."""
        if hasattr(self, "_producer"):
            del self._producer

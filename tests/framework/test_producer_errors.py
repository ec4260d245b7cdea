"""How a failed producer call's confluent-kafka error becomes ours: only a real fencing stops
the processor; an abortable transaction is retried; anything else is a plain Kafka error."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from framework.kafka import (
    KafkaIOError,
    ProducerFencedError,
    TransactionAbortableError,
)
from framework.kafka.confluent_producer import producer_error


def _error(code: int, *, fatal: bool = False, abortable: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, "why", fatal=fatal, txn_requires_abort=abortable))


def test_a_newer_instance_fences_the_producer() -> None:
    assert type(producer_error(_error(KafkaError._FENCED, fatal=True), "x")) is (
        ProducerFencedError
    )
    # as librdkafka reported it on the real broker: fatal, and the transaction to abort
    both = _error(KafkaError._FENCED, fatal=True, abortable=True)
    assert type(producer_error(both, "flushing")) is ProducerFencedError
    fatal = _error(KafkaError._STATE, fatal=True, abortable=True)  # not to be retried
    assert type(producer_error(fatal, "x")) is KafkaIOError
    assert type(producer_error(_error(KafkaError.PRODUCER_FENCED, fatal=True), "x")) is (
        ProducerFencedError
    )


def test_only_a_fencing_error_reads_as_fenced() -> None:
    """Only _FENCED and PRODUCER_FENCED name a fencing; any other fatal error restarts the
    processor, and a timed-out transaction that is not fatal is retried. (librdkafka also
    reports a transaction the broker aborted for its timeout as _FENCED: the runtime tells
    the two apart by the control log's instance records, tests/sim/test_fencing.py.)"""
    epoch = producer_error(_error(KafkaError.INVALID_PRODUCER_EPOCH, fatal=True), "x")
    assert type(epoch) is KafkaIOError
    timed_out = producer_error(_error(KafkaError._TIMED_OUT, abortable=True), "committing")
    assert type(timed_out) is TransactionAbortableError
    assert str(timed_out).startswith("committing failed:")


def test_a_fatal_error_raised_from_a_callback_is_found_behind_a_system_error() -> None:
    """confluent-kafka can raise a fatal error from ``flush`` as a ``SystemError`` caused by
    the ``KafkaException`` (seen on the real broker when another instance fenced one)."""
    try:
        try:
            raise _error(KafkaError._FENCED, fatal=True)
        except KafkaException as cause:
            raise SystemError("returned a result with an exception set") from cause
    except SystemError as error:
        assert type(producer_error(error, "flushing")) is ProducerFencedError

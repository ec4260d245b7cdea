"""Exactly-once helpers of a processor run: what fencing means to it, and committing group
offsets through its transactional producer (so that a fenced instance commits nothing)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from framework.kafka import (
    KafkaConsumer,
    KafkaIOError,
    ProducerFencedError,
    TransactionalProducer,
)
from framework.processing import ProcessorFencedError
from rebalance.positions import Position

__all__ = ["TRANSACTION_SECONDS", "abort_quietly", "commit_offsets", "fenced"]

log = logging.getLogger(__name__)

#: how long a transaction's commit or abort may take
TRANSACTION_SECONDS = 60.0


def fenced(processor: int, error: ProducerFencedError) -> ProcessorFencedError:
    """The stop of processor ``processor`` whose producer another instance fenced."""
    return ProcessorFencedError(
        f"processor {processor} was fenced: another instance of processor {processor} "
        f"started since this one ({error}). It stops; nothing of its uncommitted batch is "
        "visible. Fix: run each processor id once (stop the other instance first when moving "
        "a processor to another machine)."
    )


def commit_offsets(
    transactions: TransactionalProducer,
    consumer: KafkaConsumer,
    offsets: Mapping[Position, int],
    processor: int,
) -> None:
    """Commit ``offsets`` to ``consumer``'s group in a transaction of its own (aborted, and
    the error raised, when it fails; ``ProcessorFencedError`` when fenced)."""
    try:
        transactions.begin()
        try:
            transactions.send_offsets(offsets, consumer)
            transactions.commit(TRANSACTION_SECONDS)
        except ProducerFencedError:
            raise
        except BaseException:
            abort_quietly(transactions, processor)
            raise
    except ProducerFencedError as error:
        raise fenced(processor, error) from None


def abort_quietly(transactions: TransactionalProducer, processor: int) -> None:
    """Abort the open transaction after a failure. The abort's own failure is logged (the
    caller raises its error), unless it says the producer was fenced: the first failure may
    not have said so (librdkafka's ``produce`` reports only "fatal error"), and a fenced
    processor must stop as one."""
    try:
        transactions.abort(TRANSACTION_SECONDS)
    except ProducerFencedError as error:
        raise fenced(processor, error) from None
    except KafkaIOError as error:
        log.warning("processor %d: aborting a transaction: %s", processor, error)

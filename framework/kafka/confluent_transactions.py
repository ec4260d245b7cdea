"""The port's transactional producer over confluent-kafka, and how its errors become ours."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from confluent_kafka import KafkaException, Producer, TopicPartition

from framework.kafka.confluent_consumer import TIMEOUT
from framework.kafka.confluent_producer import ConfluentProducer, producer_error
from framework.kafka.port import KafkaConsumer, TransactionalProducer
from rebalance.positions import Position

__all__ = ["ConfluentTransactionalProducer"]


#: how long the metadata request before ``init_transactions`` may take (a warm-up)
_WARM_UP_SECONDS = 1.0


class ConfluentTransactionalProducer(ConfluentProducer, TransactionalProducer):
    """``TransactionalProducer`` over a confluent-kafka ``Producer`` with a
    ``transactional.id``; ``init_transactions`` runs when it is made."""

    def __init__(self, producer: Producer, timeout: float = TIMEOUT) -> None:
        super().__init__(producer)
        try:
            # metadata first: asked for its producer id while it still swaps its bootstrap
            # connection for the broker's own, a new producer often misses the coordinator
            # and waits half a second (librdkafka's retry) before asking again
            with contextlib.suppress(KafkaException):  # a warm-up: init reports the errors
                producer.list_topics(timeout=_WARM_UP_SECONDS)
            producer.init_transactions(timeout)
        except KafkaException as error:
            raise producer_error(error, "initialising transactions") from None

    def begin(self) -> None:
        """Open a transaction."""
        try:
            self._producer.begin_transaction()
        except KafkaException as error:
            raise producer_error(error, "beginning a transaction") from None

    def send_offsets(self, offsets: Mapping[Position, int], consumer: KafkaConsumer) -> None:
        """Add the group's next offsets to the open transaction."""
        listed = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        try:
            self._producer.send_offsets_to_transaction(listed, consumer.group_metadata(), TIMEOUT)
        except KafkaException as error:
            raise producer_error(error, "sending offsets to the transaction") from None

    def commit(self, timeout: float) -> None:
        """Flush and commit the open transaction."""
        try:
            self._producer.commit_transaction(timeout)
        except KafkaException as error:
            raise producer_error(error, "committing a transaction") from None

    def abort(self, timeout: float) -> None:
        """Abort the open transaction."""
        try:
            self._producer.abort_transaction(timeout)
        except KafkaException as error:
            raise producer_error(error, "aborting a transaction") from None

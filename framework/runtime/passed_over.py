"""Offsets a ``read_committed`` consumer passes over without a record.

An input written by a transactional producer (another app's exactly-once output) holds
transaction markers and, when a transaction aborted, its records: each takes an offset, and a
``read_committed`` consumer moves past them without delivering anything. A processor's state
offset is one past the last record it applied, so it stays *before* such offsets: below a
commit marker at the end of a partition, or with none at all on a partition that holds only
an aborted transaction, while Kafka's end offset (the last stable offset) is past them. Any
comparison of that state offset with the end then counts them as records not processed yet:
a release would wait for ever for them to be read, lag never reaches 0.

So wherever every record delivered so far has been applied, the state may say it is where the
consumer got to: the offsets between hold nothing to apply (Kafka Streams commits the
consumer's position for the same reason, KAFKA-6607).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from framework.kafka import KafkaConsumer
from rebalance.positions import Position

__all__ = ["passed_over"]


def passed_over(
    consumer: KafkaConsumer, positions: Iterable[Position], offsets: Mapping[Position, int]
) -> dict[Position, int]:
    """The consumer's position of each of ``positions`` that is past ``offsets`` (the state's
    next offsets; a partition without one has none): the offsets between were passed over
    without a record.

    Call it only where every record ``consumer`` delivered has been applied to what
    ``offsets`` describes (no batch in flight): a delivered record not applied yet would be
    passed over too. A partition whose position the consumer does not know (nothing fetched
    since it was assigned or sought) is left out.
    """
    passed: dict[Position, int] = {}
    for position in sorted(positions):
        reached = consumer.position(position)
        if reached is None:
            continue
        stored = offsets.get(position)
        if stored is None or reached > stored:
            passed[position] = reached
    return passed

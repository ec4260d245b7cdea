"""The input of bench/window_sum.py, written once, and the window sums it must give.

``records`` readings: keys ``sensor-00000`` ... drawn uniformly from ``keys``, values random
ints 0-999 as JSON, Kafka timestamps rising evenly over ``minutes`` of event time (ending a
minute before now). Each key's timestamps rise, so no record is late and a key's minute closes
(grace 0) at its first record of a later minute: every minute of a key but its last closes.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

import orjson
from confluent_kafka import KafkaError, Message, Producer

from framework.producer import SplitstateProducer

__all__ = ["MINUTE", "Sums", "WindowSums", "produce_readings"]

MINUTE = 60_000
#: ``(key, window start) -> (window end, sum)``
Sums = dict[tuple[bytes, int], tuple[int, int]]


def produce_readings(
    bootstrap: str, topic: str, records: int, *, keys: int, minutes: int = 60, seed: int = 35
) -> Sums:
    """Write the readings to ``topic`` and return the window sums that must close.

    Keys are placed as ``SplitstateProducer`` places them (and carry its ``splitstate.count``
    header); it has no way to set a record's timestamp, so a plain producer writes them, with
    the partition and header it gives."""
    placing = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    partitioner = placing.partitioner
    placing.close()
    header = partitioner.count_header(topic)
    names = [f"sensor-{i:05d}".encode() for i in range(keys)]
    partitions = [partitioner.partition(topic, name) for name in names]
    rng = random.Random(seed)
    span = minutes * MINUTE
    first = (int(time.time() * 1000) - span - MINUTE) // MINUTE * MINUTE
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failed.append(error)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000},
    )
    sums = WindowSums()
    for i in range(records):
        k = rng.randrange(keys)
        value = rng.randrange(1000)
        at = first + i * span // records
        sums.add(names[k], at, value)
        while True:
            try:
                producer.produce(
                    topic,
                    orjson.dumps(value),
                    names[k],
                    partition=partitions[k],
                    timestamp=at,
                    headers=[header],
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) or failed:
        raise RuntimeError(f"the input of {topic!r} was not all delivered: {failed[:3]}")
    return sums.closed()


class WindowSums:
    """Each key's 1-minute tumbling sums of the readings added (grace 0)."""

    def __init__(self) -> None:
        self._sums: defaultdict[tuple[bytes, int], int] = defaultdict(int)
        self._time: dict[bytes, int] = {}

    def add(self, key: bytes, at: int, value: int) -> None:
        """Add ``value`` at event time ``at`` (ms) to ``key``'s minute."""
        self._sums[key, at - at % MINUTE] += value
        self._time[key] = max(self._time.get(key, at), at)

    def closed(self) -> Sums:
        """The windows closed by their key's time: those that end at or before it (every
        window of a key but its last, when its readings came in rising time)."""
        return {
            (key, start): (start + MINUTE, total)
            for (key, start), total in self._sums.items()
            if start + MINUTE <= self._time[key]
        }

"""The input of bench/window_sum.py, written once, and the window sums it must give.

``records`` readings: keys ``sensor-00000`` ... drawn uniformly from ``keys``, values random
ints 0-999 as JSON, Kafka timestamps rising evenly over ``minutes`` of event time (ending a
minute before now). Each key's timestamps rise, so no record is late and a key's minute closes
(grace 0) at its first record of a later minute. After them, one *closing* reading per key
that had any (value 0, at the end of the last minute, in key order): it closes every minute
of its key by the key's own time, so every window of the readings closes, and the closing
readings' own minutes stay open.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass

import orjson
from confluent_kafka import KafkaError, Message, Producer

from framework.producer import SplitstateProducer

__all__ = ["MINUTE", "Readings", "Sums", "WindowSums", "produce_readings"]

MINUTE = 60_000
#: ``(key, window start) -> (window end, sum)``
Sums = dict[tuple[bytes, int], tuple[int, int]]


@dataclass(frozen=True)
class Readings:
    """What ``produce_readings`` wrote: the window sums that must close, and how many
    records (the readings and the closing ones)."""

    sums: Sums
    records: int
    closing: int


def produce_readings(
    bootstrap: str, topic: str, records: int, *, keys: int, minutes: int = 60, seed: int = 35
) -> Readings:
    """Write the readings, then the closing ones, to ``topic``; what must close.

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
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "enable.idempotence": True,  # each partition in the order produced, retries too
        },
    )
    sums = WindowSums()

    def produce(k: int, value: int, at: int) -> None:
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
                return
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)

    seen: set[int] = set()
    for i in range(records):
        k = rng.randrange(keys)
        seen.add(k)
        produce(k, rng.randrange(1000), first + i * span // records)
        if i % 10_000 == 0:
            producer.poll(0)
    for k in sorted(seen):  # the closing readings: at the end of the last minute
        produce(k, 0, first + span)
    if producer.flush(300) or failed:
        raise RuntimeError(f"the input of {topic!r} was not all delivered: {failed[:3]}")
    return Readings(sums.closed(), records + len(seen), len(seen))


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

"""Writing a benchmark's input once: random words from a fixed vocabulary, placed by key."""

from __future__ import annotations

import random

from confluent_kafka import Producer

from framework.kafka import Clients
from framework.producer import SplitstateProducer
from rebalance import bucket, key_hash

__all__ = ["produce_words"]


def produce_words(
    bootstrap: str,
    topic: str,
    records: int,
    *,
    distinct: int = 10_000,
    seed: int = 11,
    count_header: bool = True,
) -> None:
    """Write ``records`` words (keys) drawn from ``distinct`` words to ``topic``. Without
    ``count_header`` a plain producer writes them, placed where ``SplitstateProducer`` places
    them (the topic's partition count as ``N``) but without the ``splitstate.count`` header:
    what processors check without the header is measured then."""
    rng = random.Random(seed)
    vocabulary = [f"word-{i:05d}".encode() for i in range(distinct)]
    if not count_header:
        _produce_plain(bootstrap, topic, records, vocabulary, rng)
        return
    producer = SplitstateProducer(
        {"bootstrap.servers": bootstrap}, [topic], {"linger.ms": 50, "batch.size": 1_000_000}
    )
    for i in range(records):
        producer.produce(topic, rng.choice(vocabulary), b"")
        if i % 10_000 == 0:
            producer.poll(0)
    producer.close(300)


def _produce_plain(
    bootstrap: str, topic: str, records: int, vocabulary: list[bytes], rng: random.Random
) -> None:
    """``produce_words`` without the count header: a plain producer, keys placed by hand."""
    count = Clients({"bootstrap.servers": bootstrap}).partition_counts([topic])[topic]
    partitions = {word: bucket(key_hash(word), count, count) for word in vocabulary}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    for i in range(records):
        word = rng.choice(vocabulary)
        while True:
            try:
                producer.produce(topic, b"", word, partition=partitions[word])
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError(f"the input of {topic!r} was not all delivered")

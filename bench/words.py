"""Writing a benchmark's input once: random words from a fixed vocabulary, placed by key."""

from __future__ import annotations

import random

from framework.producer import SplitstateProducer

__all__ = ["produce_words"]


def produce_words(
    bootstrap: str, topic: str, records: int, *, distinct: int = 10_000, seed: int = 11
) -> None:
    """Write ``records`` words (keys) drawn from ``distinct`` words to ``topic``."""
    rng = random.Random(seed)
    vocabulary = [f"word-{i:05d}".encode() for i in range(distinct)]
    producer = SplitstateProducer(
        {"bootstrap.servers": bootstrap}, [topic], {"linger.ms": 50, "batch.size": 1_000_000}
    )
    for i in range(records):
        producer.produce(topic, rng.choice(vocabulary), b"")
        if i % 10_000 == 0:
            producer.poll(0)
    producer.close(300)

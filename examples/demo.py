"""The demo behind `make demo`: a local broker and a keyed produce/consume round trip.

It starts a broker in a temporary directory, writes 1,000 keyed records to a 4-partition
topic, reads them back with a consumer group, prints where each key landed, and stops
everything it started. (The wordcount app and a live scale-out join this demo later.)
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from framework.broker import LocalBroker

TOPIC = "demo-words"
WORDS = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel"]
RECORDS = 1_000


def main() -> None:
    """Run the round trip and print the results."""
    with tempfile.TemporaryDirectory(prefix="splitstate-demo-") as directory:
        broker = LocalBroker(Path(directory) / "broker")
        print("starting a local Kafka broker ...")
        info = broker.start()
        print(f"bootstrap.servers={info.bootstrap_servers}")
        try:
            round_trip(info.bootstrap_servers)
        finally:
            broker.stop()
            print("broker stopped")


def round_trip(bootstrap: str) -> None:
    """Produce keyed records, consume them back, print per-partition and per-key counts."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=WORDS[i % len(WORDS)].encode(), value=str(i).encode())
    producer.flush(30)
    print(f"produced {RECORDS} records to {TOPIC!r} (4 partitions)")

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "demo",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    per_key: Counter[str] = Counter()
    partition_of: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while sum(per_key.values()) < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=500, timeout=1.0):
            key, partition = message.key(), message.partition()
            if message.error() is None and key is not None and partition is not None:
                word = key.decode()
                per_key[word] += 1
                partition_of[word] = partition
    consumer.commit(asynchronous=False)
    consumer.close()
    print(f"consumed {sum(per_key.values())} records and committed the group's offsets\n")
    print(f"{'key':<8} {'partition':>9} {'records':>8}")
    for word in WORDS:
        print(f"{word:<8} {partition_of.get(word, -1):>9} {per_key[word]:>8}")


if __name__ == "__main__":
    main()

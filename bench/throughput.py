"""Records/s of wordcount on one processor vs a plain loop with no framework (the ceiling).

All read the same topic (1M records by default, 4 partitions, 10,000 distinct words) on the
same local broker. The plain loop and splitstate at-least-once give the same guarantees per
batch: count words in RocksDB, write the counts and offsets in one WriteBatch, produce one JSON
output per record and wait for delivery, then commit the consumer group's offsets. splitstate
exactly-once puts each batch's outputs and group offsets in one Kafka transaction, committed
before the WriteBatch; the table gives its rate against at-least-once (issue goal: >= 0.8).

Run: .venv/bin/python bench/throughput.py [--records N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples package

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from rocksdict import Options, Rdict, WriteBatch

from bench.words import produce_words
from examples.wordcount.app import app as wordcount
from framework import AppConfig
from framework.kafka import Clients, TopicSpec
from framework.ops.broker import LocalBroker
from framework.runtime.loop import ProcessorRuntime

PARTITIONS = 4
BATCH = 2000


def ceiling(bootstrap: str, topic: str, output: str, records: int, state: Path) -> float:
    """The plain loop; returns seconds to process ``records``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-ceiling",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    db = Rdict(str(state), Options(raw_mode=True))
    done = 0
    start = time.perf_counter()
    while done < records:
        messages = consumer.consume(num_messages=BATCH, timeout=0.1)
        if not messages:
            continue
        batch = WriteBatch(raw_mode=True)
        counts: dict[bytes, int] = {}
        offsets: dict[tuple[str, int], int] = {}
        for message in messages:
            key = message.key()
            assert key is not None
            count = counts.get(key)
            if count is None:
                stored = db.get(key)
                count = 0 if stored is None else int(stored)
            count += 1
            counts[key] = count
            producer.produce(output, orjson.dumps({"word": key.decode(), "count": count}), key)
            offsets[(str(message.topic()), int(message.partition() or 0))] = (
                int(message.offset() or 0) + 1
            )
        for key, count in counts.items():
            batch.put(key, str(count).encode())
        for (t, p), o in offsets.items():
            batch.put(f"offset/{t}/{p}".encode(), str(o).encode())
        producer.flush()
        db.write(batch)
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=True
        )
        done += len(messages)
    elapsed = time.perf_counter() - start
    consumer.close()
    db.close()
    return elapsed


def framework_run(
    bootstrap: str, topic: str, output: str, records: int, state: Path, *, guarantee: str
) -> float:
    """wordcount through splitstate's runtime, processor 0 of 1, with outputs ``guarantee``;
    returns seconds."""
    config = AppConfig.load(
        wordcount.config_file,
        app_id=f"bench-wordcount-{guarantee}",
        kafka={"bootstrap_servers": bootstrap},
        inputs=[{"topic": topic, "partitions": PARTITIONS}],
        outputs=[{"topic": output, "partitions": PARTITIONS}],
        initial_processors=1,
        processors=1,
        state_dir=str(state),
        batch={"max_records": BATCH, "max_wait_ms": 100},
        processing_guarantee=guarantee,
    )
    wordcount.configure(config)
    runtime = ProcessorRuntime(wordcount, 0)
    first: list[float] = []

    def until(stats: object) -> bool:
        if not first:
            first.append(time.perf_counter())
        return runtime.stats.records >= records

    runtime.run(until=until)
    return time.perf_counter() - first[0]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-throughput-"))
    broker = None if args.bootstrap else LocalBroker(scratch / "broker")
    try:
        bootstrap = args.bootstrap or broker.start().bootstrap_servers  # type: ignore[union-attr]
        kafka = Clients({"bootstrap.servers": bootstrap})
        topic, out_plain, out_ours = "bench-words", "bench-plain-out", "bench-ours-out"
        out_exact = "bench-exactly-once-out"
        names = (topic, out_plain, out_ours, out_exact)
        kafka.create_topics([TopicSpec(name, PARTITIONS) for name in names])
        start = time.perf_counter()
        produce_words(bootstrap, topic, args.records)
        print(f"produced {args.records:,} records in {time.perf_counter() - start:.1f}s")
        plain = ceiling(bootstrap, topic, out_plain, args.records, scratch / "plain-state")
        ours = framework_run(
            bootstrap,
            topic,
            out_ours,
            args.records,
            scratch / "ours-state",
            guarantee="at-least-once",
        )
        exact = framework_run(
            bootstrap,
            topic,
            out_exact,
            args.records,
            scratch / "exact-state",
            guarantee="exactly-once",
        )
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{'run':<44} {'records/s':>12} {'seconds':>9}")
    for label, seconds in [
        ("ceiling: plain confluent-kafka + rocksdict", plain),
        ("splitstate wordcount, at-least-once", ours),
        ("splitstate wordcount, exactly-once", exact),
    ]:
        print(f"{label:<44} {args.records / seconds:>12,.0f} {seconds:>9.1f}")
    print(f"\nsplitstate at-least-once / ceiling = {plain / ours:.2f}")
    print(f"splitstate exactly-once / at-least-once = {ours / exact:.2f}")


if __name__ == "__main__":
    main()

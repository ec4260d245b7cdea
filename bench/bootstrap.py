"""Spark bootstrap vs replay catch-up: building a joining processor's keys from history.

One local broker, one wordcount topic of 2 partitions (``--records`` in total, default 4M,
20,000 distinct words), ``initial_processors: 1``, and a scale 1 -> 2: processor 1 gains
partition 1, so both methods must rebuild every key of partition 1 (half the records, 2M by
default) from the topic:

- *replay*: the runtime's ``CatchUp`` reads the partition through one consumer and applies
  each record with the processor function in restore mode (what ``bootstrap: replay`` does);
- *Spark*: ``build_state`` (Spark ``local[2]``: Kafka source, route, fold with the same
  function, SST files) plus ``bulk_load`` into the processor's database (what
  ``bootstrap: spark`` does), session start included.

Both end with identical state (checked). Prints records/s of each and the ratio.

Run: .venv/bin/python bench/bootstrap.py [--records N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples package

from confluent_kafka import Consumer, TopicPartition

from bench.words import produce_words
from examples.wordcount.app import app as wordcount
from framework import AppConfig
from framework.bootstrap.build import BuildRequest, build_state
from framework.coordination.layout import prepare_app
from framework.coordination.scaling import request_scale
from framework.kafka import Clients, TopicSpec, watermarks
from framework.ops.broker import LocalBroker
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from rebalance.positions import OffsetRange
from statestore import DatabaseIdentity, ProcessorDatabase

PARTITIONS = 2
JOINER = 1


def replay(config: AppConfig, scale: Any, state: Path, end: int) -> tuple[float, dict[bytes, Any]]:
    """The replay catch-up; returns its seconds and the state it built."""
    identity = DatabaseIdentity(config.app_id, JOINER, {})
    database = ProcessorDatabase.open(state, identity, wordcount.store_specs())
    start = time.perf_counter()
    catchup = CatchUp(
        JOINER,
        config.initial_processors,
        scale,
        kafka=Clients.of(config),
        group_id=config.app_id,
        database=database,
        records=RecordProcessor(wordcount),
    )
    position = (config.inputs[0].topic, JOINER)
    while catchup.positions[position] < end:
        catchup.step(config.scaling.catchup_batch)
    seconds = time.perf_counter() - start
    catchup.close()
    built = dict(database.items("counts"))
    database.close()
    return seconds, built


def spark(
    config: AppConfig, request: BuildRequest, scratch: Path
) -> tuple[float, dict[bytes, Any]]:
    """The Spark bootstrap plus ingest; returns its seconds and the state it built."""
    identity = DatabaseIdentity(config.app_id, JOINER, {})
    database = ProcessorDatabase.open(scratch / "spark-state", identity, wordcount.store_specs())
    start = time.perf_counter()
    manifest = build_state(wordcount, request, scratch / "spark-output")
    target = manifest.targets[JOINER]
    database.bulk_load(manifest.files(JOINER), target.offsets, scope="bench")
    seconds = time.perf_counter() - start
    built = dict(database.items("counts"))
    database.close()
    return seconds, built


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-bootstrap-"))
    broker = None if args.bootstrap else LocalBroker(scratch / "broker")
    try:
        bootstrap = args.bootstrap or broker.start().bootstrap_servers  # type: ignore[union-attr]
        topic = f"bench-boot-{random.randrange(10**6)}"
        config = AppConfig.load(
            None,
            app_id=f"{topic}-app",
            kafka={"bootstrap_servers": bootstrap},
            inputs=[{"topic": topic, "partitions": PARTITIONS}],
            outputs=[{"topic": f"{topic}-out", "partitions": PARTITIONS}],
            initial_processors=1,
            processors=1,
            state_dir=str(scratch / "state"),
        )
        wordcount.configure(config)
        client = config.kafka.client_settings()
        kafka = Clients(client)
        kafka.create_topics([TopicSpec(topic, PARTITIONS), TopicSpec(f"{topic}-out", PARTITIONS)])
        layout = prepare_app(wordcount, kafka)
        started = time.perf_counter()
        produce_words(bootstrap, topic, args.records, distinct=20_000, seed=17)
        print(f"produced {args.records:,} records in {time.perf_counter() - started:.1f}s")

        position = (topic, JOINER)
        end = watermarks(kafka, [position])[position].end
        # T1: the old owner has processed everything (as if it ran all along).
        committer = Consumer({**client, "group.id": config.app_id, "enable.auto.commit": False})
        committer.commit(offsets=[TopicPartition(topic, JOINER, end)], asynchronous=False)
        committer.close()
        scale = request_scale(wordcount, 2)

        replay_seconds, replayed = replay(config, scale, scratch / "replay-state", end)
        request = BuildRequest(
            processors=2,
            covers={JOINER: [position]},
            ranges={position: OffsetRange(0, end)},
            retained=watermarks(kafka, [position]),
            entries=layout.inputs,
        )
        spark_seconds, built = spark(config, request, scratch)
        assert built == replayed, "the Spark bootstrap and the replay built different state"
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"\nrebuilding processor {JOINER}'s keys: {end:,} records of partition {JOINER}, "
        f"{len(built):,} keys, same state both ways"
    )
    print(f"{'method':<52} {'records/s':>12} {'seconds':>9}")
    for label, seconds in [
        ("replay catch-up (bootstrap: replay)", replay_seconds),
        ("Spark local[2] read+fold+SST + ingest (bootstrap: spark)", spark_seconds),
    ]:
        print(f"{label:<52} {end / seconds:>12,.0f} {seconds:>9.1f}")
    print(f"\nSpark / replay = {replay_seconds / spark_seconds:.2f}x")


if __name__ == "__main__":
    main()

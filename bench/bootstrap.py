"""Spark bootstrap vs replay catch-up: building a joining processor's keys from history.

One local broker, one wordcount topic of 2 partitions (``--records`` in total, default 4M,
20,000 distinct words), ``initial_processors: 1``, and a scale 1 -> 2: processor 1 gains
partition 1, so both methods must rebuild every key of partition 1 (half the records, 2M by
default) from the topic:

- *replay*: the runtime's ``CatchUp`` reads the partition through one consumer and applies
  each record with the processor function in restore mode (what ``bootstrap: replay`` does;
  with the processor loop's rarer cycle collection, as there);
- *Spark*: ``build_state`` (Kafka source, group, fold with the same function, SST files)
  plus ``bulk_load`` into the processor's database (what ``bootstrap: spark`` does), on
  ``local[1]`` and on ``local[2]``. Each master runs in its own process (a fresh JVM): the
  session is started first and timed apart, then the same build runs twice in it -- in a
  new session (its JVM compiles Spark's code and its Python workers import the app as it
  goes) and again in the reused session.

Every Spark build must end with the state the replay built (checked). Prints records/s of
each, Spark ``local[2]`` / replay and the ``local[1]`` -> ``local[2]`` speed-up.

Run: .venv/bin/python bench/bootstrap.py [--records N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples package

from confluent_kafka import Consumer, TopicPartition

from bench.words import produce_words
from examples.wordcount.app import app as wordcount
from framework import AppConfig
from framework.bootstrap.build import BuildRequest, bootstrap_session, build_state
from framework.coordination.layout import prepare_app
from framework.coordination.scaling import request_scale
from framework.gc_tuning import fewer_collections
from framework.kafka import Clients, TopicSpec, watermarks
from framework.ops.broker import LocalBroker
from framework.processing import RecordProcessor
from framework.runtime.catchup import CatchUp
from rebalance.positions import OffsetRange
from statestore import DatabaseIdentity, ProcessorDatabase

PARTITIONS = 2
JOINER = 1
MASTERS = ("local[1]", "local[2]")


def tree_cpu() -> float:
    """CPU seconds used so far by this process and its descendants (the JVM, Spark's Python
    daemon and workers, and the children they reaped), read from ``/proc``; 0 elsewhere."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick  # self + reaped
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


@dataclass(frozen=True)
class Timing:
    """Wall seconds of one way of building, and CPU seconds of its processes."""

    seconds: float
    cpu: float


def replay(config: AppConfig, scale: Any, state: Path, end: int) -> tuple[Timing, dict[bytes, Any]]:
    """The replay catch-up; returns its timing and the state it built."""
    identity = DatabaseIdentity(config.app_id, JOINER, {})
    database = ProcessorDatabase.open(state, identity, wordcount.store_specs())
    start, cpu = time.perf_counter(), time.process_time()
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
    with fewer_collections():  # as in the processor loop, which runs catch-ups
        while catchup.positions[position] < end:
            catchup.step(config.scaling.catchup_batch)
    timing = Timing(time.perf_counter() - start, time.process_time() - cpu)
    catchup.close()
    built = dict(database.items("counts"))
    database.close()
    return timing, built


@dataclass(frozen=True)
class SparkRun:
    """One master's timings: session start, a build in the new session, one in it again."""

    master: str
    session: float
    first: Timing
    reused: Timing


def spark(
    config: AppConfig, request: BuildRequest, scratch: Path, replayed: dict[bytes, Any]
) -> SparkRun:
    """In a process of its own: start a session on ``config``'s master, then build (and
    ingest) twice in it; each build must give the replay's state."""
    logging.basicConfig(level=logging.WARNING)
    wordcount.configure(config)
    started = time.perf_counter()
    session = bootstrap_session(wordcount)
    session_seconds = time.perf_counter() - started
    try:
        timings = []
        for run in ("first", "reused"):
            identity = DatabaseIdentity(config.app_id, JOINER, {})
            state = scratch / f"spark-state-{run}"
            database = ProcessorDatabase.open(state, identity, wordcount.store_specs())
            start, cpu = time.perf_counter(), tree_cpu()
            output = scratch / f"spark-output-{run}"
            manifest = build_state(wordcount, request, output, spark=session)
            target = manifest.targets[JOINER]
            database.bulk_load(manifest.files(JOINER), target.offsets, scope="bench")
            timings.append(Timing(time.perf_counter() - start, tree_cpu() - cpu))
            built = dict(database.items("counts"))
            database.close()
            shutil.rmtree(state)
            shutil.rmtree(output)
            assert built == replayed, f"Spark {config.spark.master} ({run}) built other state"
    finally:
        session.stop()
    return SparkRun(config.spark.master, session_seconds, *timings)


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

        replay_timing, replayed = replay(config, scale, scratch / "replay-state", end)
        request = BuildRequest(
            processors=2,
            covers={JOINER: [position]},
            ranges={position: OffsetRange(0, end)},
            retained=watermarks(kafka, [position]),
            entries=layout.inputs,
        )
        runs = []
        for master in MASTERS:
            # a process (and JVM) per master, so neither starts with the other's warm JVM
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                spark_config = config.model_copy(
                    update={"spark": config.spark.model_copy(update={"master": master})}
                )
                runs.append(pool.submit(spark, spark_config, request, scratch, replayed).result())
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report(end, len(replayed), replay_timing, runs)


def report(records: int, keys: int, replayed: Timing, runs: list[SparkRun]) -> None:
    """The table, then the ratios the targets are about."""
    print(
        f"\nrebuilding processor {JOINER}'s keys: {records:,} records of partition {JOINER}, "
        f"{keys:,} keys, the same state every way"
    )
    print(f"{'method':<58} {'records/s':>10} {'seconds':>8} {'CPU s':>7} {'cores':>6}")

    def row(name: str, timing: Timing) -> None:
        print(
            f"{name:<58} {records / timing.seconds:>10,.0f} {timing.seconds:>8.1f} "
            f"{timing.cpu:>7.1f} {timing.cpu / timing.seconds:>6.2f}"
        )

    row("replay catch-up (bootstrap: replay)", replayed)
    for run in runs:
        print(
            f"{f'Spark {run.master} session start (not in the rows below)':<58} {'':>10} "
            f"{run.session:>8.1f}"
        )
        row(f"Spark {run.master} read+fold+SST + ingest, new session", run.first)
        row(f"Spark {run.master} read+fold+SST + ingest, reused session", run.reused)
    by_master = {run.master: run for run in runs}
    one, two = by_master["local[1]"], by_master["local[2]"]
    print("\n(CPU s: the build's processes, without the broker's; cores: CPU s / seconds)")
    for label, attribute in [("new session", "first"), ("reused session", "reused")]:
        seconds_one = getattr(one, attribute).seconds
        seconds_two = getattr(two, attribute).seconds
        print(
            f"{label + ':':<16} Spark local[2] / replay = {replayed.seconds / seconds_two:.2f}x, "
            f"local[1] -> local[2] speed-up = {seconds_one / seconds_two:.2f}x"
        )


if __name__ == "__main__":
    main()

"""The runs of bench/throughput.py, each in a process of its own (so its peak RSS is its own).

Run by the benchmark, not by hand: ``python bench/throughput_runs.py KIND --bootstrap HOST:PORT
--topic T --output O --records N --state DIR --group G --started EPOCH``, KIND one of
``plain-flush``, ``plain-no-flush``, ``at-least-once``, ``exactly-once`` (``-waiting``: one
batch in flight), or ``catch-up`` (bench/catchup.py). It processes the first N records of T
(``catch-up``: see ``catch_up_run``) and prints one JSON line (``Timing.line``) as its last line
on stdout.

How every run is timed (the Quix run, bench/quix_wordcount.py, prints the same fields):
``startup`` is wall-clock seconds from ``--started`` (the parent's clock just before it started
this process) to the first record processed; ``steady`` is seconds from then until the run
returned, its last outputs delivered, offsets committed and clients closed; ``records`` is how
many records were processed in ``steady`` (those after the first moment); ``stop`` is seconds
from the last record processed to the run's return; ``rss_kib`` is this process's peak RSS
(``bench.peak_rss``); ``cpu`` is the CPU seconds of the process (all its threads: librdkafka's
too) in ``steady``.
The runs that work in batches see their first and last record processed at the end of a batch.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples package

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from rocksdict import Options, Rdict, WriteBatch

from bench.peak_rss import peak_rss_kib

if TYPE_CHECKING:
    from framework.app import App
    from framework.runtime.loop import RuntimeStats

__all__ = ["BATCH", "KINDS", "PARTITIONS", "Timing", "Where", "framework_run", "plain_loop"]

PARTITIONS = 4
BATCH = 2000
KINDS = (
    "plain-flush",
    "plain-no-flush",
    "at-least-once-waiting",
    "at-least-once",
    "exactly-once-waiting",
    "exactly-once",
    "catch-up",
)


@dataclass(frozen=True)
class Timing:
    """What one run measured (see the module docstring)."""

    startup: float
    steady: float
    records: int
    stop: float
    rss_kib: int
    #: CPU seconds of the process (all its threads) in ``steady`` (0: not measured)
    cpu: float = 0.0

    @property
    def rate(self) -> float:
        """Records per second in the steady part."""
        return self.records / self.steady if self.steady > 0 else 0.0

    @property
    def cpu_rate(self) -> float:
        """Records per CPU second in the steady part (0: not measured)."""
        return self.records / self.cpu if self.cpu > 0 else 0.0

    def line(self) -> str:
        """The JSON line the parent reads."""
        return orjson.dumps(asdict(self)).decode()


@dataclass(frozen=True)
class Where:
    """What a run reads and writes: the first ``records`` records of ``topic``, outputs to
    ``output``, state in ``state``; ``group`` is its consumer group (splitstate: its app id)."""

    bootstrap: str
    topic: str
    output: str
    records: int
    state: Path
    group: str


class Clock:
    """The moments a run notes: first and last record processed, and the run's return."""

    def __init__(self, started: float) -> None:
        self.started = started  # wall clock (time.time) of the parent, before it spawned us
        self.first_wall = 0.0
        self.first = 0.0
        self.first_records = 0
        self.first_cpu = 0.0
        self.last = 0.0

    def processed(self, records: int) -> None:
        """``records`` processed so far (the first call with records > 0 is the first)."""
        now = time.perf_counter()
        if not self.first and records > 0:
            self.first, self.first_wall, self.first_records = now, time.time(), records
            self.first_cpu = time.process_time()
        self.last = now

    def timing(self, records: int) -> Timing:
        """The run returned having processed ``records``."""
        end = time.perf_counter()
        return Timing(
            startup=self.first_wall - self.started,
            steady=end - self.first,
            records=records - self.first_records,
            stop=end - self.last,
            rss_kib=peak_rss_kib(),
            cpu=time.process_time() - self.first_cpu,
        )


def plain_loop(where: Where, clock: Clock, *, flush_per_batch: bool) -> Timing:
    """confluent-kafka + rocksdict, no framework. Per batch: count words in RocksDB, write the
    counts and offsets in one WriteBatch, produce one JSON output per record, commit the group's
    offsets (async). With ``flush_per_batch`` it waits for the outputs' delivery before the
    WriteBatch and the commit (at-least-once outputs); without, it flushes only at the end."""
    bootstrap, output = where.bootstrap, where.output
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": where.group, "enable.auto.commit": False}
    )
    partitions = range(PARTITIONS)
    consumer.assign([TopicPartition(where.topic, p, OFFSET_BEGINNING) for p in partitions])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    db = Rdict(str(where.state), Options(raw_mode=True))
    done = 0
    while done < where.records:
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
            _produce(producer, output, orjson.dumps({"word": key.decode(), "count": count}), key)
            offsets[(str(message.topic()), int(message.partition() or 0))] = (
                int(message.offset() or 0) + 1
            )
        for key, count in counts.items():
            batch.put(key, str(count).encode())
        for (t, p), o in offsets.items():
            batch.put(f"offset/{t}/{p}".encode(), str(o).encode())
        if flush_per_batch:
            producer.flush()
        else:
            producer.poll(0)  # serve delivery reports, so the queue does not fill up
        db.write(batch)
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=True
        )
        done += len(messages)
        clock.processed(done)
    producer.flush()
    consumer.close()
    db.close()
    return clock.timing(done)


def _produce(producer: Producer, topic: str, value: bytes, key: bytes) -> None:
    """Produce, waiting for room when the producer's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key)
            return
        except BufferError:
            producer.poll(0.05)


def _wordcount(where: Where, guarantee: str, in_flight: int, **overrides: Any) -> App:
    """examples/wordcount configured for ``where`` (processor 0 of 1 unless ``overrides``)."""
    # imported here: the plain loops' processes load none of the framework
    from examples.wordcount.app import app as wordcount  # noqa: PLC0415
    from framework import AppConfig  # noqa: PLC0415

    config = AppConfig.load(
        wordcount.config_file,
        app_id=where.group,
        kafka={"bootstrap_servers": where.bootstrap},
        inputs=[{"topic": where.topic, "partitions": PARTITIONS}],
        outputs=[{"topic": where.output, "partitions": PARTITIONS}],
        state_dir=str(where.state),
        batch={"max_records": BATCH, "max_wait_ms": 100, "in_flight": in_flight},
        processing_guarantee=guarantee,
        **{"initial_processors": 1, "processors": 1, **overrides},
    )
    wordcount.configure(config)
    return wordcount


def framework_run(where: Where, clock: Clock, *, guarantee: str, in_flight: int = 4) -> Timing:
    """wordcount through splitstate's runtime, processor 0 of 1, with outputs ``guarantee``
    and ``in_flight`` batches pipelined (1: each batch waits for Kafka)."""
    from framework.runtime.loop import ProcessorRuntime  # noqa: PLC0415

    runtime = ProcessorRuntime(_wordcount(where, guarantee, in_flight), 0)

    def until(stats: RuntimeStats) -> bool:
        clock.processed(stats.records)
        return stats.records >= where.records

    stats = runtime.run(until=until)
    return clock.timing(stats.records)


def catch_up_run(where: Where, clock: Clock) -> Timing:
    """The catch-up of processor 1 (``bootstrap: replay``) after a scale 1 -> 2 of the app
    whose processor 0 (group ``where.group``) processed the whole topic: processor 1 reads
    partitions 1 and 3 from the beginning to T1 (the group's committed offsets) and rebuilds
    their keys, no outputs. Counted: the records its catch-up read, until it read them all
    (it is then CAUGHT_UP; processor 0 does not run, so nothing is released)."""
    from framework.coordination.scaling import request_scale  # noqa: PLC0415
    from framework.runtime.loop import ProcessorRuntime  # noqa: PLC0415

    wordcount = _wordcount(where, "at-least-once", 4, processors=2, bootstrap="replay")
    request_scale(wordcount, 2)
    consumer = Consumer({"bootstrap.servers": where.bootstrap, "group.id": where.group})
    gained = [TopicPartition(where.topic, p) for p in range(1, PARTITIONS, 2)]
    target = sum(tp.offset for tp in consumer.committed(gained, timeout=30))
    consumer.close()
    runtime = ProcessorRuntime(wordcount, 1)

    def until(stats: RuntimeStats) -> bool:
        clock.processed(stats.replayed)
        return stats.replayed >= target

    stats = runtime.run(until=until)
    return clock.timing(stats.replayed)


def main() -> None:
    """Run one KIND and print its ``Timing`` as a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--started", type=float, required=True)
    parser.add_argument("--group", required=True, help="the group id (splitstate: the app id)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    clock = Clock(args.started)
    where = Where(args.bootstrap, args.topic, args.output, args.records, args.state, args.group)
    if args.kind == "catch-up":
        timing = catch_up_run(where, clock)
    elif args.kind.startswith("plain"):
        timing = plain_loop(where, clock, flush_per_batch=args.kind == "plain-flush")
    else:
        guarantee, waiting, _ = args.kind.partition("-waiting")
        timing = framework_run(where, clock, guarantee=guarantee, in_flight=1 if waiting else 4)
    print(timing.line(), flush=True)


if __name__ == "__main__":
    main()
